//! Unit tests of the endpoint's pieces: the read-ahead stage, segments and CM options.

use super::*;

/// A connected pair of sockets on loopback.
fn pair() -> (Sock, Sock) {
    let (c, s, _) = crate::sock::tests::loopback_pair();
    (c, s)
}

const STAGE_LEN: usize = 16 * 1024;

#[test]
fn staged_reads_keep_the_stream_in_order() {
    stream_in_order(STAGE_LEN);
}

#[test]
fn reads_without_read_ahead_keep_the_stream_in_order() {
    stream_in_order(0);
}

fn stream_in_order(read_ahead: usize) {
    let (tx, rx) = pair();
    let total = 3 * STAGE_LEN + 123;
    let data: Vec<u8> = (0..total).map(|i| (i * 7 % 251) as u8).collect();
    let writer = std::thread::spawn(move || {
        tx.write_all_timeout(&data, 5000).unwrap();
        tx
    });
    let mut stage = RxStage::new(read_ahead);
    let mut got = Vec::with_capacity(total);
    // Small reads (headers), a scatter read, and a read of at least STAGE_LEN.
    let pattern = [HDR_LEN, 24, 3, 5000, 1, STAGE_LEN + 10, 7];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut k = 0;
    while got.len() < total {
        assert!(
            std::time::Instant::now() < deadline,
            "stalled at {}",
            got.len()
        );
        let want = pattern[k % pattern.len()].min(total - got.len());
        k += 1;
        let mut buf = vec![0u8; want];
        let n = if k % 3 == 0 {
            let (a, b) = buf.split_at_mut(want / 2);
            let iov = [
                iovec(a.as_mut_ptr() as usize, a.len()),
                iovec(b.as_mut_ptr() as usize, b.len()),
            ];
            // SAFETY: both halves of `buf` are writable for their lengths.
            unsafe { stage.readv(&rx, &iov) }
        } else {
            stage.recv(&rx, &mut buf)
        };
        match n {
            Ok(0) => panic!("end of stream after {} bytes", got.len()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if would_block(&e) => {
                k -= 1;
                let _ = rx.poll(libc::POLLIN, 100);
            }
            Err(e) => panic!("read: {e}"),
        }
    }
    let _tx = writer.join().unwrap();
    let want: Vec<u8> = (0..total).map(|i| (i * 7 % 251) as u8).collect();
    assert!(got == want, "the bytes came out of order or changed");
    assert_eq!(stage.pending(), 0);
}

#[test]
fn segs_window_and_iovecs() {
    let mut s = Segs::default();
    s.push(1000, 10);
    s.push(2000, 5);
    s.push(3000, 20);
    let w = s.window(8, 10);
    assert_eq!(w.segs(), &[(1008, 2), (2000, 5), (3000, 3)]);
    let mut iov = [iovec(0, 0); 4];
    let n = s.iovecs(12, 100, &mut iov);
    assert_eq!(n, 2);
    assert_eq!(iov[0].iov_base as usize, 2002);
    assert_eq!(iov[0].iov_len, 3);
    assert_eq!(iov[1].iov_len, 20);
    assert_eq!(s.total().unwrap(), 35);
    assert!(!s.push(0, 0) || s.n <= SEGS_MAX);
}

#[test]
fn cm_options() {
    let mut v = [0u8; 8];
    assert_eq!(cm_getopt(0, 1, &mut v).unwrap(), 8);
    assert_eq!(usize::from_ne_bytes(v), CM_DATA_SIZE);
    assert_eq!(
        cm_getopt(0, 1, &mut [0u8; 4]).unwrap_err().code(),
        Errno::ETOOSMALL
    );
    assert_eq!(
        cm_getopt(0, 0, &mut v).unwrap_err().code(),
        Errno::ENOPROTOOPT
    );
    // Read only (fi_endpoint(3)), whatever the value.
    for v in [16usize, CM_DATA_SIZE, 1000] {
        assert_eq!(
            cm_setopt(0, 1, &v.to_ne_bytes()).unwrap_err().code(),
            Errno::EINVAL,
            "{v}"
        );
    }
    assert_eq!(
        cm_setopt(0, 0, &16usize.to_ne_bytes()).unwrap_err().code(),
        Errno::ENOPROTOOPT
    );
}
