//! The connect header (the connector's name before the application's CM data): round
//! trip, and malformed headers from a peer are refused without a panic.

use ofi::Address;
use ofi_prov_verbs::cm::{decode_connect, encode_connect, CONNECT_DATA_MAX};
use ofi_testkit::TestRng;

#[test]
fn round_trip_and_limits() {
    let name: std::net::SocketAddr = "10.1.2.3:4567".parse().unwrap();
    let bytes = Address::from(name).to_bytes();
    let data = vec![0xab; CONNECT_DATA_MAX];
    let enc = encode_connect(&bytes, &data);
    assert_eq!(enc.len(), ofi_rdma::cm::CONNECT_PRIVATE_MAX);
    assert_eq!(decode_connect(&enc), Some((Some(name), data)));
    // No name: the data alone.
    assert_eq!(
        decode_connect(&encode_connect(&[], b"x")),
        Some((None, b"x".to_vec()))
    );
}

#[test]
fn malformed_headers_are_refused() {
    assert_eq!(decode_connect(&[]), None);
    assert_eq!(
        decode_connect(&[16, 1, 2]),
        None,
        "name longer than the data"
    );
    assert_eq!(decode_connect(&[200]), None, "name longer than any address");
    let mut rng = TestRng::seeded(0x7e57);
    for _ in 0..2000 {
        let len = (rng.next_u64() % 57) as usize;
        let v: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        let _ = decode_connect(&v);
    }
}
