//! Atomics (fi_atomic(3)) on every endpoint type with `FI_ATOMIC`: for every operation
//! × datatype, the endpoint's `fi_atomicvalid` / `fi_fetch_atomicvalid` /
//! `fi_compare_atomicvalid` agree with the domain's `fi_query_atomic` (same support,
//! same count), operations of the wrong family are refused by both, and every
//! combination the provider reports valid is executed (base, fetch, compare) and its
//! effect on the target — and the fetched old value — checked against a reference the
//! check computes itself from the definitions in fi_atomic(3); `fi_inject_atomic`
//! lands without a completion.
//!
//! Values: the target starts at 6, the operand is 3, the compare value 6 or 5 (complex
//! numbers: 6+1i, 3+2i, 6+1i / 5+1i), so each operation changes the target (or,
//! for a failed compare, visibly does not). `long double` is the x87 80-bit format in
//! 16 bytes (x86_64); its values are converted exactly from small doubles.

use std::time::Instant;

use ofi::{AtomicKind, AtomicOp, Caps, Datatype, OpFlags};

use super::rma::Region;
use crate::pair::{each_pair_where, show, Pair};
use crate::{Subject, WAIT};

/// `FI_FETCH_ATOMIC` (a `fi_query_atomic` flag; core's value).
pub const FETCH_ATOMIC: u64 = ofi::flags::AtomicQueryFlags::FETCH_ATOMIC.bits();
/// `FI_COMPARE_ATOMIC` (core's value).
pub const COMPARE_ATOMIC: u64 = ofi::flags::AtomicQueryFlags::COMPARE_ATOMIC.bits();

/// Size of the target region: one 64-byte slot per operation run (at most 3 families ×
/// 19 operations × 16 datatypes × 2 compare values).
const ATOMIC_REGION: usize = 3 * 19 * 16 * 2 * 64;

/// Where, in the local region of [`atomic_ops_match_reference`], an atomic's operands
/// lie (1 KiB areas: at most two elements of 16 bytes are used).
const OPERANDS: usize = 0;
/// Where its compare values lie.
const COMPARES: usize = 1024;
/// Where its fetched old values land.
const RESULTS: usize = 2048;

/// One element's value, wide enough for every datatype.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Val {
    /// An integer (signed types sign-extended, unsigned zero-extended).
    Int(i128),
    /// A real floating-point value.
    Real(f64),
    /// A complex value (real, imaginary).
    Cplx(f64, f64),
}

fn f80_bytes(x: f64) -> [u8; 16] {
    let bits = x.to_bits();
    let sign = (bits >> 63) as u16;
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let man = bits & ((1u64 << 52) - 1);
    let mut out = [0u8; 16];
    if exp != 0 {
        // Normal numbers only (the check's values are small integers).
        let e = (exp - 1023 + 16383) as u16;
        let m = (1u64 << 63) | (man << 11);
        out[..8].copy_from_slice(&m.to_le_bytes());
        out[8..10].copy_from_slice(&((sign << 15) | e).to_le_bytes());
    } else {
        out[8..10].copy_from_slice(&(sign << 15).to_le_bytes());
    }
    out
}

fn f80_value(b: &[u8]) -> f64 {
    let m = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
    let se = u16::from_le_bytes([b[8], b[9]]);
    let sign = if se >> 15 == 1 { -1.0 } else { 1.0 };
    let e = i32::from(se & 0x7fff);
    if e == 0 && m == 0 {
        return 0.0 * sign;
    }
    sign * (m as f64) * 2f64.powi(e - 16383 - 63)
}

fn signed(dt: Datatype) -> bool {
    matches!(
        dt,
        Datatype::Int8 | Datatype::Int16 | Datatype::Int32 | Datatype::Int64 | Datatype::Int128
    )
}

/// Encode `v` as one element of `dt`.
pub fn encode(dt: Datatype, v: Val) -> Vec<u8> {
    let n = dt.size();
    match (dt, v) {
        (Datatype::Float, Val::Real(x)) => (x as f32).to_le_bytes().to_vec(),
        (Datatype::Double, Val::Real(x)) => x.to_le_bytes().to_vec(),
        (Datatype::LongDouble, Val::Real(x)) => f80_bytes(x).to_vec(),
        (Datatype::FloatComplex, Val::Cplx(r, i)) => {
            let mut o = (r as f32).to_le_bytes().to_vec();
            o.extend_from_slice(&(i as f32).to_le_bytes());
            o
        }
        (Datatype::DoubleComplex, Val::Cplx(r, i)) => {
            let mut o = r.to_le_bytes().to_vec();
            o.extend_from_slice(&i.to_le_bytes());
            o
        }
        (Datatype::LongDoubleComplex, Val::Cplx(r, i)) => {
            let mut o = f80_bytes(r).to_vec();
            o.extend_from_slice(&f80_bytes(i));
            o
        }
        (_, Val::Int(x)) => x.to_le_bytes()[..n].to_vec(),
        (dt, v) => panic!("no encoding of {v:?} as {dt}"),
    }
}

/// Decode one element of `dt`.
pub fn decode(dt: Datatype, b: &[u8]) -> Val {
    let n = dt.size();
    match dt {
        Datatype::Float => Val::Real(f64::from(f32::from_le_bytes(b[..4].try_into().unwrap()))),
        Datatype::Double => Val::Real(f64::from_le_bytes(b[..8].try_into().unwrap())),
        Datatype::LongDouble => Val::Real(f80_value(&b[..16])),
        Datatype::FloatComplex => Val::Cplx(
            f64::from(f32::from_le_bytes(b[..4].try_into().unwrap())),
            f64::from(f32::from_le_bytes(b[4..8].try_into().unwrap())),
        ),
        Datatype::DoubleComplex => Val::Cplx(
            f64::from_le_bytes(b[..8].try_into().unwrap()),
            f64::from_le_bytes(b[8..16].try_into().unwrap()),
        ),
        Datatype::LongDoubleComplex => Val::Cplx(f80_value(&b[..16]), f80_value(&b[16..32])),
        _ => {
            let mut w = [0u8; 16];
            w[..n].copy_from_slice(&b[..n]);
            let neg = signed(dt) && b[n - 1] & 0x80 != 0;
            if neg {
                w[n..].fill(0xff);
            }
            Val::Int(i128::from_le_bytes(w))
        }
    }
}

fn wrap(dt: Datatype, x: i128) -> i128 {
    match decode(dt, &x.to_le_bytes()) {
        Val::Int(v) => v,
        _ => x,
    }
}

fn nonzero(v: Val) -> bool {
    match v {
        Val::Int(x) => x != 0,
        Val::Real(x) => x != 0.0,
        Val::Cplx(r, i) => r != 0.0 || i != 0.0,
    }
}

fn truth(dt: Datatype, b: bool) -> Val {
    let one = if b { 1.0 } else { 0.0 };
    if dt.is_complex() {
        Val::Cplx(one, 0.0)
    } else if dt.is_integer() {
        Val::Int(i128::from(b))
    } else {
        Val::Real(one)
    }
}

fn ordered(a: Val, b: Val) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (Val::Int(x), Val::Int(y)) => Some(x.cmp(&y)),
        (Val::Real(x), Val::Real(y)) => x.partial_cmp(&y),
        _ => None,
    }
}

/// The new target value of `op` on target `t` with operand `o` and compare `c`;
/// `None` where fi_atomic(3) defines no result for the datatype.
pub fn reference(dt: Datatype, op: AtomicOp, t: Val, o: Val, c: Val) -> Option<Val> {
    use std::cmp::Ordering::*;
    Some(match op {
        AtomicOp::Min => match ordered(t, o)? {
            Greater => o,
            _ => t,
        },
        AtomicOp::Max => match ordered(t, o)? {
            Less => o,
            _ => t,
        },
        AtomicOp::Sum => match (t, o) {
            (Val::Int(a), Val::Int(b)) => Val::Int(wrap(dt, a.wrapping_add(b))),
            (Val::Real(a), Val::Real(b)) => Val::Real(a + b),
            (Val::Cplx(a, b), Val::Cplx(x, y)) => Val::Cplx(a + x, b + y),
            _ => return None,
        },
        AtomicOp::Prod => match (t, o) {
            (Val::Int(a), Val::Int(b)) => Val::Int(wrap(dt, a.wrapping_mul(b))),
            (Val::Real(a), Val::Real(b)) => Val::Real(a * b),
            (Val::Cplx(a, b), Val::Cplx(x, y)) => Val::Cplx(a * x - b * y, a * y + b * x),
            _ => return None,
        },
        AtomicOp::Lor => truth(dt, nonzero(t) || nonzero(o)),
        AtomicOp::Land => truth(dt, nonzero(t) && nonzero(o)),
        AtomicOp::Lxor => truth(dt, nonzero(t) != nonzero(o)),
        AtomicOp::Bor | AtomicOp::Band | AtomicOp::Bxor => match (t, o) {
            (Val::Int(a), Val::Int(b)) => Val::Int(wrap(
                dt,
                match op {
                    AtomicOp::Bor => a | b,
                    AtomicOp::Band => a & b,
                    _ => a ^ b,
                },
            )),
            _ => return None,
        },
        AtomicOp::AtomicRead => t,
        AtomicOp::AtomicWrite => o,
        AtomicOp::Cswap => {
            if c == t {
                o
            } else {
                t
            }
        }
        AtomicOp::CswapNe => {
            if c != t {
                o
            } else {
                t
            }
        }
        AtomicOp::CswapLe | AtomicOp::CswapLt | AtomicOp::CswapGe | AtomicOp::CswapGt => {
            let ord = ordered(c, t)?;
            let swap = match op {
                AtomicOp::CswapLe => ord != Greater,
                AtomicOp::CswapLt => ord == Less,
                AtomicOp::CswapGe => ord != Less,
                _ => ord == Greater,
            };
            if swap {
                o
            } else {
                t
            }
        }
        AtomicOp::Mswap => match (t, o, c) {
            (Val::Int(a), Val::Int(b), Val::Int(m)) => Val::Int(wrap(dt, (b & m) | (a & !m))),
            _ => return None,
        },
    })
}

fn values(dt: Datatype, compare: i32) -> (Val, Val, Val) {
    if dt.is_complex() {
        (
            Val::Cplx(6.0, 1.0),
            Val::Cplx(3.0, 2.0),
            Val::Cplx(f64::from(compare), 1.0),
        )
    } else if dt.is_integer() {
        (Val::Int(6), Val::Int(3), Val::Int(i128::from(compare)))
    } else {
        (
            Val::Real(6.0),
            Val::Real(3.0),
            Val::Real(f64::from(compare)),
        )
    }
}

fn family_flag(k: AtomicKind) -> u64 {
    match k {
        AtomicKind::Base => 0,
        AtomicKind::Fetch => FETCH_ATOMIC,
        AtomicKind::Compare => COMPARE_ATOMIC,
    }
}

fn valid(p: &Pair, k: AtomicKind, dt: Datatype, op: AtomicOp) -> ofi::Result<usize> {
    match k {
        AtomicKind::Base => p.a.ep.atomicvalid(dt, op),
        AtomicKind::Fetch => p.a.ep.fetch_atomicvalid(dt, op),
        AtomicKind::Compare => p.a.ep.compare_atomicvalid(dt, op),
    }
}

const FAMILIES: [AtomicKind; 3] = [AtomicKind::Base, AtomicKind::Fetch, AtomicKind::Compare];

/// `fi_*atomicvalid` on the endpoint and `fi_query_atomic` on the domain agree for
/// every operation × datatype × family; wrong-family operations are refused by both.
pub fn atomic_valid_matches_query(s: &Subject) {
    each_pair_where(
        s,
        Caps::ATOMIC,
        |_| true,
        |p| {
            let mut supported = 0;
            for &k in &FAMILIES {
                for &op in AtomicOp::ALL {
                    for &dt in Datatype::ALL {
                        let v = valid(&p, k, dt, op);
                        let q = p.domain.query_atomic(dt, op, family_flag(k));
                        match (&v, &q) {
                        (Ok(n), Ok(a)) => {
                            assert_eq!(*n, a.count, "{k:?} {op} {dt}: valid count {n} vs query_atomic count {}", a.count);
                            assert!(*n >= 1, "{k:?} {op} {dt}: valid with count 0");
                            assert_eq!(a.size, dt.size(), "{k:?} {op} {dt}: query_atomic size");
                            assert!(op.valid_for(k), "{k:?} accepts {op}, an operation of another family");
                            supported += 1;
                        }
                        (Err(_), Err(_)) => {}
                        _ => panic!("{k:?} {op} {dt}: fi_*atomicvalid says {v:?}, fi_query_atomic says {q:?}"),
                    }
                    }
                }
            }
            assert!(supported > 0, "FI_ATOMIC claimed but no operation is valid");
            println!("  {supported} valid combinations");
            // Bad query flags are refused before any provider answers.
            for bad in [FETCH_ATOMIC | COMPARE_ATOMIC, 1 << 0] {
                let q = p.domain.query_atomic(Datatype::Uint64, AtomicOp::Sum, bad);
                assert_eq!(
                    q.err().map(|e| e.code()),
                    Some(ofi::Errno::EBADFLAGS),
                    "fi_query_atomic with flags {bad:#x}"
                );
            }
        },
    );
}

fn await_target(
    p: &Pair,
    target: &Region,
    off: usize,
    dt: Datatype,
    want: Val,
    count: usize,
    what: &str,
) {
    let n = dt.size();
    let deadline = Instant::now() + WAIT;
    loop {
        let b = target.bytes();
        let got: Vec<Val> = (0..count).map(|i| decode(dt, &b[off + i * n..])).collect();
        if got.iter().all(|&g| g == want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: target holds {got:?}, expected {want:?}"
        );
        p.drive();
        std::thread::yield_now();
    }
}

/// What one atomic call does: its kind, and `count` elements of `dt` combined by `op`.
#[derive(Clone, Copy)]
struct AtomicCall {
    kind: AtomicKind,
    dt: Datatype,
    op: AtomicOp,
    count: usize,
}

/// Issue `call` from side a into offset `off` of `target`, the operands (and compare
/// values) read from `local` at [`OPERANDS`] (and [`COMPARES`]), the fetched old values
/// written to `local` at [`RESULTS`].
///
/// # Safety
///
/// `local` lives (and its areas stay untouched) until the operation's completion has
/// been read.
unsafe fn issue_atomic(
    p: &Pair,
    call: AtomicCall,
    local: &Region,
    target: &Region,
    off: usize,
    ctx: usize,
) -> ofi::Result<()> {
    let AtomicCall {
        kind: k,
        dt,
        op,
        count,
    } = call;
    let (ep, peer) = (&p.a.ep, p.a.peer);
    let (addr, key, desc) = (target.addr + off as u64, target.mr.key(), local.mr.desc());
    let l = local.ptr;
    // SAFETY: the three areas lie in `local`, which the caller keeps alive until the
    // completion.
    unsafe {
        let (buf, compare, result) = (
            l.add(OPERANDS).cast(),
            l.add(COMPARES).cast(),
            l.add(RESULTS).cast(),
        );
        match k {
            AtomicKind::Base => ep.atomic(buf, count, desc, peer, addr, key, dt, op, ctx),
            AtomicKind::Fetch => {
                ep.fetch_atomic(buf, count, desc, result, desc, peer, addr, key, dt, op, ctx)
            }
            AtomicKind::Compare => ep.compare_atomic(
                buf, count, desc, compare, desc, result, desc, peer, addr, key, dt, op, ctx,
            ),
        }
    }
}

/// Every valid operation × datatype runs (base, fetch and compare calls) and leaves
/// the target — and the fetched old value — as the reference says.
pub fn atomic_ops_match_reference(s: &Subject) {
    each_pair_where(
        s,
        Caps::ATOMIC,
        |_| true,
        |p| {
            let mut target = Region::new(
                &p,
                1,
                ATOMIC_REGION,
                0,
                OpFlags::REMOTE_READ | OpFlags::REMOTE_WRITE,
                0x81,
            );
            let mut local = Region::new(&p, 0, 4096, 0, OpFlags::READ | OpFlags::WRITE, 0x82);
            let mut slot = 0usize;
            let mut ran = 0;
            for &k in &FAMILIES {
                for &op in AtomicOp::ALL {
                    for &dt in Datatype::ALL {
                        let Ok(max) = valid(&p, k, dt, op) else {
                            continue;
                        };
                        let count = max.min(2);
                        for compare in [6, 5] {
                            if compare == 5 && k != AtomicKind::Compare {
                                continue;
                            }
                            let (tv, ov, cv) = values(dt, compare);
                            let Some(want) = reference(dt, op, tv, ov, cv) else {
                                panic!("{k:?} {op} {dt} is valid, but fi_atomic(3) defines no result for it");
                            };
                            let n = dt.size();
                            let off = slot * 64;
                            slot += 1;
                            assert!(
                                off + 64 <= ATOMIC_REGION,
                                "too many combinations for the region"
                            );
                            let what = format!("{k:?} {op} {dt} x{count} (compare {compare})");
                            for i in 0..count {
                                target.set(off + i * n, &encode(dt, tv));
                                local.set(OPERANDS + i * n, &encode(dt, ov));
                                local.set(COMPARES + i * n, &encode(dt, cv));
                                local.set(RESULTS + i * n, &vec![0xcc; n]);
                            }
                            let ctx = 0x10_0000 + slot;
                            // SAFETY: `local` lives until the completion is read below.
                            let r = unsafe {
                                let call = AtomicCall {
                                    kind: k,
                                    dt,
                                    op,
                                    count,
                                };
                                issue_atomic(&p, call, &local, &target, off, ctx)
                            };
                            r.unwrap_or_else(|e| panic!("{what}: {e} ({})", e.code()));
                            let c = p.wait_ok(0, &what);
                            assert_eq!(c.op_context, ctx, "{what}: completion {}", show(&c));
                            let fl = match k {
                                AtomicKind::Base => OpFlags::ATOMIC | OpFlags::WRITE,
                                _ => OpFlags::ATOMIC | OpFlags::READ,
                            };
                            crate::pair::assert_flags(&c, fl, &what);
                            await_target(&p, &target, off, dt, want, count, &what);
                            if k != AtomicKind::Base {
                                let lb = local.bytes();
                                for i in 0..count {
                                    let old = decode(dt, &lb[RESULTS + i * n..]);
                                    assert_eq!(old, tv, "{what}: fetched old value #{i}");
                                }
                            }
                            ran += 1;
                        }
                    }
                }
            }
            // fi_inject_atomic: FI_SUM on a uint64 (where valid), no completion.
            if valid(&p, AtomicKind::Base, Datatype::Uint64, AtomicOp::Sum).is_ok()
                && p.info.tx_attr.inject_size >= 8
            {
                let off = slot * 64;
                assert!(off + 64 <= ATOMIC_REGION);
                target.set(off, &40u64.to_le_bytes());
                let two = 2u64.to_le_bytes();
                // SAFETY: `two` is valid for one uint64 during the call (inject copies it).
                unsafe {
                    p.a.ep.inject_atomic(
                        two.as_ptr().cast(),
                        1,
                        p.a.peer,
                        target.addr + off as u64,
                        target.mr.key(),
                        Datatype::Uint64,
                        AtomicOp::Sum,
                    )
                }
                .unwrap_or_else(|e| panic!("fi_inject_atomic: {e} ({})", e.code()));
                await_target(
                    &p,
                    &target,
                    off,
                    Datatype::Uint64,
                    Val::Int(42),
                    1,
                    "fi_inject_atomic FI_SUM",
                );
                p.assert_quiet(0, 20, "fi_inject_atomic generates no completion");
            }
            println!("  {ran} atomic operations verified");
            assert!(ran > 0);
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_and_codecs() {
        for &dt in Datatype::ALL {
            for v in [values(dt, 6).0, values(dt, 5).2] {
                assert_eq!(decode(dt, &encode(dt, v)), v, "{dt}");
            }
        }
        use Val::{Cplx, Int};
        let (t, o, c) = values(Datatype::Uint8, 5);
        // (datatype, operation, target, operand, compare, the reference's answer)
        let cases = [
            (Datatype::Uint8, AtomicOp::Mswap, t, o, c, Int(3)),
            (Datatype::Int8, AtomicOp::Prod, Int(100), Int(3), c, Int(44)),
            (Datatype::Uint8, AtomicOp::Sum, Int(255), Int(3), c, Int(2)),
            (
                Datatype::DoubleComplex,
                AtomicOp::Prod,
                Cplx(6.0, 1.0),
                Cplx(3.0, 2.0),
                c,
                Cplx(16.0, 15.0),
            ),
            (Datatype::Int32, AtomicOp::CswapLt, t, o, Int(5), Int(3)),
            (Datatype::Int32, AtomicOp::CswapGt, t, o, Int(5), Int(6)),
        ];
        for (dt, op, t, o, c, want) in cases {
            assert_eq!(reference(dt, op, t, o, c), Some(want), "{op} {dt}");
        }
        assert_eq!(f80_value(&f80_bytes(-18.0)), -18.0);
        let (ft, fo, fc) = values(Datatype::Float, 6);
        assert!(reference(Datatype::Float, AtomicOp::Bor, ft, fo, fc).is_none());
        assert_eq!(
            reference(Datatype::Float, AtomicOp::Min, ft, fo, fc),
            Some(Val::Real(3.0))
        );
    }

    /// The reference agrees with kit's engine (an independent implementation) on every
    /// combination kit supports: new target and fetched old value.
    #[test]
    fn reference_agrees_with_kit() {
        let mut n = 0;
        for &k in &FAMILIES {
            for &op in AtomicOp::ALL {
                for &dt in Datatype::ALL {
                    if ofi_kit::atomic::valid(op, dt, k).is_err() {
                        continue;
                    }
                    for compare in [6, 5] {
                        let (t, o, c) = values(dt, compare);
                        let want = reference(dt, op, t, o, c).unwrap_or_else(|| {
                            panic!("{k:?} {op} {dt}: kit supports it, no reference")
                        });
                        let mut target = encode(dt, t);
                        let mut result = vec![0u8; dt.size()];
                        ofi_kit::atomic::apply(
                            ofi_kit::atomic::AtomicCall::new(op, dt, k, 1),
                            &mut target,
                            ofi_kit::atomic::AtomicArgs::new(
                                &encode(dt, o),
                                &encode(dt, c),
                                &mut result,
                            ),
                        )
                        .unwrap_or_else(|e| panic!("kit {k:?} {op} {dt}: {e}"));
                        assert_eq!(
                            decode(dt, &target),
                            want,
                            "{k:?} {op} {dt} compare {compare}"
                        );
                        if k != AtomicKind::Base {
                            assert_eq!(decode(dt, &result), t, "{k:?} {op} {dt}: fetched value");
                        }
                        n += 1;
                    }
                }
            }
        }
        assert!(n > 300, "{n} combinations compared");
    }
}
