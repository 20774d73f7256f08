//! The atomic engine: every operation × datatype of fi_atomic(3) applied to target bytes,
//! the answers to the valid / query calls, and locking so that concurrent operations on
//! one target are atomic with respect to each other.
//!
//! # What the engine supports
//!
//! Operations belong to call families ([`AtomicKind`]): base calls take MIN … BXOR and
//! ATOMIC_WRITE; fetch calls take those and ATOMIC_READ; compare calls take the swaps.
//! Within a family, an operation applies to a datatype as its definition allows:
//!
//! | operations | integers (8…128 bit) | float, double, long double | complex types |
//! | --- | --- | --- | --- |
//! | SUM PROD LOR LAND LXOR ATOMIC_READ ATOMIC_WRITE CSWAP CSWAP_NE | yes | yes | yes |
//! | MIN MAX CSWAP_LE CSWAP_LT CSWAP_GE CSWAP_GT | yes | yes | no (no ordering) |
//! | BOR BAND BXOR MSWAP | yes | no (bitwise) | no |
//!
//! Everything else answers `FI_EOPNOTSUPP`. `long double` is the x86_64 format (the x87
//! 80-bit extended type stored in 16 bytes), computed exactly in software by the `f80`
//! submodule; on other targets the engine refuses `FI_LONG_DOUBLE` and
//! `FI_LONG_DOUBLE_COMPLEX`. The engine has no count limit of its own beyond the address
//! space: [`valid`] answers `MAX_ATOMIC_BYTES / size`; a provider clamps this to its
//! message size.
//!
//! # Semantics (the seed's definitions, `addr` = target, `buf` = operand)
//!
//! - MIN: `if (buf < addr) addr = buf`; MAX: `if (buf > addr) addr = buf`. For floating
//!   types this is the IEEE comparison, so a NaN on either side leaves the target as it
//!   was, and `-0`/`+0` compare equal (no change).
//! - SUM / PROD: integers wrap (two's complement, signed and unsigned alike); floating
//!   types round to nearest; complex types use `(a+bi)+(c+di)` and
//!   `(ac-bd) + (ad+bc)i`, each step rounded to the component type.
//! - LOR / LAND / LXOR are logical: the result is `1` or `0` of the datatype (for complex
//!   `1+0i` / `0+0i`); a value is true when it is not equal to zero (a NaN is true, a
//!   complex value is true if either part is).
//! - BOR / BAND / BXOR: bitwise.
//! - ATOMIC_READ: `result = addr`; ATOMIC_WRITE: `addr = buf`.
//! - CSWAP_*: `if (compare OP addr) addr = buf` with OP one of `== != <= < >= >`, the
//!   compare value on the LEFT (CSWAP_LT swaps when `compare < addr`). Comparisons are by
//!   value: for floating types `-0 == +0` and a NaN never compares equal. (C builds of
//!   libfabric that implement CSWAP with a compiler compare-exchange compare the bytes
//!   instead; the seed defines `==`, which this engine follows.)
//! - MSWAP: `addr = (buf & compare) | (addr & ~compare)`: `compare` is the mask and the
//!   masked bits come from `buf`.
//! - Fetch and compare calls write each element's ORIGINAL target bytes to `result`.
//! - Where the target takes the operand as it is (WRITE, the swaps, MIN/MAX) its bytes
//!   are copied unchanged (NaN payloads and `long double` padding included); a computed
//!   `long double` writes its 10 value bytes and leaves the 6 padding bytes alone.
//!
//! # Invariants
//!
//! Buffers are raw bytes in native byte order with no alignment requirement; elements
//! are read and written with `from_ne_bytes` / `to_ne_bytes`. [`apply`] checks the
//! operation, the count and every buffer length before it touches anything: on error no
//! byte of `target` or `result` has changed. Atomicity holds per element and, through
//! [`AtomicRegion`] / [`AtomicLocks`], with respect to other operations through the same
//! region or lock set. Nothing in this module panics.

mod elem;
mod f80;
mod region;

pub use region::{
    AtomicLockGuard, AtomicLocks, AtomicRegion, DEFAULT_GRANULE, DEFAULT_PAGE_SIZE, DEFAULT_STRIPES,
};

use ofi_core::enums::{AtomicKind, AtomicOp, Datatype};
use ofi_core::error::{fail, Errno, Result};
use ofi_core::flags::AtomicQueryFlags;

use elem::{Complex, Elem, Scalar, Step};
use f80::F80;

/// `FI_FETCH_ATOMIC`: [`query`] answers for fetch calls (core's
/// [`AtomicQueryFlags::FETCH_ATOMIC`], as a plain bit for providers' flag words).
pub const FETCH_ATOMIC: u64 = AtomicQueryFlags::FETCH_ATOMIC.bits();
/// `FI_COMPARE_ATOMIC`: [`query`] answers for compare calls (core's
/// [`AtomicQueryFlags::COMPARE_ATOMIC`]).
pub const COMPARE_ATOMIC: u64 = AtomicQueryFlags::COMPARE_ATOMIC.bits();
/// `FI_TAGGED` (`1 << 3`): a [`query`] about atomics on tagged receive buffers.
pub const TAGGED: u64 = AtomicQueryFlags::TAGGED.bits();

/// The most bytes one operation may cover: the largest slice Rust can address. [`valid`]
/// answers `MAX_ATOMIC_BYTES / size` elements.
pub const MAX_ATOMIC_BYTES: usize = isize::MAX as usize;

/// `struct fi_atomic_attr`: the answer of [`query`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicAttr {
    /// Most elements one call may operate on (as the valid calls report it).
    pub count: usize,
    /// Size in bytes of one element of the datatype.
    pub size: usize,
}

/// True when `dt` is `long double` (real or complex).
fn is_long_double(dt: Datatype) -> bool {
    matches!(dt, Datatype::LongDouble | Datatype::LongDoubleComplex)
}

/// Whether `op` applies to `dt` at all (the table in the module docs), ignoring the call
/// family.
fn applies_to(op: AtomicOp, dt: Datatype) -> bool {
    if is_long_double(dt) && !cfg!(target_arch = "x86_64") {
        return false;
    }
    match op {
        AtomicOp::Bor | AtomicOp::Band | AtomicOp::Bxor | AtomicOp::Mswap => dt.is_integer(),
        AtomicOp::Min
        | AtomicOp::Max
        | AtomicOp::CswapLe
        | AtomicOp::CswapLt
        | AtomicOp::CswapGe
        | AtomicOp::CswapGt => !dt.is_complex(),
        AtomicOp::Sum
        | AtomicOp::Prod
        | AtomicOp::Lor
        | AtomicOp::Land
        | AtomicOp::Lxor
        | AtomicOp::AtomicRead
        | AtomicOp::AtomicWrite
        | AtomicOp::Cswap
        | AtomicOp::CswapNe => true,
    }
}

/// The largest element count of `dt` one operation may cover.
pub fn max_count(dt: Datatype) -> usize {
    MAX_ATOMIC_BYTES / dt.size()
}

fn family_name(kind: AtomicKind) -> &'static str {
    match kind {
        AtomicKind::Base => "base atomic",
        AtomicKind::Fetch => "fetch atomic",
        AtomicKind::Compare => "compare atomic",
    }
}

/// `fi_atomicvalid` / `fi_fetch_atomicvalid` / `fi_compare_atomicvalid`: whether the
/// engine performs `op` on `dt` with calls of family `kind`, and if so the most
/// elements one call may cover.
///
/// Errors: `FI_EOPNOTSUPP` when `op` does not belong to the family (e.g. ATOMIC_READ
/// with base calls, CSWAP with fetch calls) or does not apply to `dt`.
pub fn valid(op: AtomicOp, dt: Datatype, kind: AtomicKind) -> Result<usize> {
    if !op.valid_for(kind) {
        return fail(
            Errno::EOPNOTSUPP,
            format!("{} is not a {} operation", op.name(), family_name(kind)),
        );
    }
    if !applies_to(op, dt) {
        return fail(
            Errno::EOPNOTSUPP,
            format!("{} is not supported on {}", op.name(), dt.name()),
        );
    }
    Ok(max_count(dt))
}

/// The call family selected by `fi_query_atomic` flags: none → base, `FETCH_ATOMIC` →
/// fetch, `COMPARE_ATOMIC` → compare.
///
/// Errors: `FI_EBADFLAGS` for bits other than `FETCH_ATOMIC`, `COMPARE_ATOMIC` and
/// `TAGGED`, or for `FETCH_ATOMIC` together with `COMPARE_ATOMIC` (the seed forbids
/// both); `FI_EOPNOTSUPP` for `TAGGED`: the engine does not target tagged receive
/// buffers (a provider that does answers that part itself and clears the bit).
pub fn query_kind(flags: u64) -> Result<AtomicKind> {
    let flags = AtomicQueryFlags::validate(flags)?;
    if flags.contains(AtomicQueryFlags::TAGGED) {
        return fail(
            Errno::EOPNOTSUPP,
            "atomic operations on tagged receive buffers are not supported",
        );
    }
    Ok(if flags.contains(AtomicQueryFlags::FETCH_ATOMIC) {
        AtomicKind::Fetch
    } else if flags.contains(AtomicQueryFlags::COMPARE_ATOMIC) {
        AtomicKind::Compare
    } else {
        AtomicKind::Base
    })
}

/// `fi_query_atomic`: [`valid`] for the family the `flags` select (see [`query_kind`]),
/// with the element size.
///
/// Errors: those of [`query_kind`], then those of [`valid`].
pub fn query(op: AtomicOp, dt: Datatype, flags: u64) -> Result<AtomicAttr> {
    let kind = query_kind(flags)?;
    let count = valid(op, dt, kind)?;
    Ok(AtomicAttr {
        count,
        size: dt.size(),
    })
}

/// The domain's `fi_query_atomic` for a provider that carries at most `max_bytes` of
/// operands in one operation: [`query`], its count capped to the elements that fit.
///
/// Errors: those of [`query`].
pub fn query_within(
    op: AtomicOp,
    dt: Datatype,
    flags: u64,
    max_bytes: usize,
) -> Result<ofi_core::abi::raw::AtomicAttr> {
    let a = query(op, dt, flags)?;
    Ok(ofi_core::abi::raw::AtomicAttr {
        count: a.count.min(max_bytes / a.size.max(1)),
        size: a.size,
    })
}

/// One atomic operation: `op` on `count` elements of `datatype`, in call family `kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicCall {
    /// The operation.
    pub op: AtomicOp,
    /// The element type.
    pub datatype: Datatype,
    /// Base, fetch or compare.
    pub kind: AtomicKind,
    /// Elements.
    pub count: usize,
}

impl AtomicCall {
    /// `op` on `count` elements of `datatype`, in family `kind`.
    pub fn new(op: AtomicOp, datatype: Datatype, kind: AtomicKind, count: usize) -> AtomicCall {
        AtomicCall {
            op,
            datatype,
            kind,
            count,
        }
    }
}

/// The initiator's buffers of an atomic: `operand` (the seed's `buf`; ignored, and
/// may be empty, for ATOMIC_READ), `compare` (compare calls only; the mask of MSWAP) and
/// `result` (fetch and compare calls, which write the original target elements there).
/// Each may be longer than the operation needs; bytes beyond are not touched.
#[derive(Debug)]
pub struct AtomicArgs<'a> {
    /// Operand bytes.
    pub operand: &'a [u8],
    /// Compare (or mask) bytes.
    pub compare: &'a [u8],
    /// Where the original elements go.
    pub result: &'a mut [u8],
}

impl<'a> AtomicArgs<'a> {
    /// The buffers of one call.
    pub fn new(operand: &'a [u8], compare: &'a [u8], result: &'a mut [u8]) -> AtomicArgs<'a> {
        AtomicArgs {
            operand,
            compare,
            result,
        }
    }
}

/// Checks everything [`apply`] checks, without touching a buffer; returns the number of
/// bytes the operation covers.
///
/// Errors: `FI_EOPNOTSUPP` as [`valid`]; `FI_EMSGSIZE` when `count` exceeds
/// [`max_count`]; `FI_EINVAL` when a buffer the operation uses is shorter than
/// `count × size`.
pub fn check(call: AtomicCall, target_len: usize, args: &AtomicArgs<'_>) -> Result<usize> {
    let AtomicCall {
        op,
        datatype: dt,
        kind,
        count,
    } = call;
    let (operand_len, compare_len, result_len) =
        (args.operand.len(), args.compare.len(), args.result.len());
    let max = valid(op, dt, kind)?;
    if count > max {
        return fail(
            Errno::EMSGSIZE,
            format!(
                "{count} elements of {} exceed the limit of {max}",
                dt.name()
            ),
        );
    }
    // Cannot overflow: count <= MAX_ATOMIC_BYTES / size.
    let bytes = count * dt.size();
    let need = |what: &str, len: usize, used: bool| -> Result<()> {
        if used && len < bytes {
            return fail(
                Errno::EINVAL,
                format!(
                    "{what} buffer holds {len} bytes; {count} x {} needs {bytes}",
                    dt.name()
                ),
            );
        }
        Ok(())
    };
    need("target", target_len, true)?;
    need("operand", operand_len, op != AtomicOp::AtomicRead)?;
    need("compare", compare_len, kind == AtomicKind::Compare)?;
    need("result", result_len, kind != AtomicKind::Base)?;
    Ok(bytes)
}

/// Applies `call` (its `op` to `count` elements of `datatype`) at the start of `target`,
/// with the initiator's buffers `args` (see [`AtomicArgs`] for which the call uses).
/// Buffers may be longer than `count × size`; bytes beyond are not touched.
/// `count == 0` does nothing. This function itself is not synchronised: it needs
/// exclusive access to `target`, which [`AtomicRegion`] and [`AtomicLocks`] provide
/// between concurrent callers.
///
/// Errors (nothing is modified): `FI_EOPNOTSUPP` when `op` is not valid for `dt` in
/// family `kind` (see [`valid`]); `FI_EMSGSIZE` when `count` exceeds [`max_count`];
/// `FI_EINVAL` when a buffer the operation uses is shorter than `count × size`.
///
/// A fetching add on two `u32` elements, as a target executing `fi_fetch_atomic` would:
///
/// ```
/// use ofi_kit::atomic::{apply, AtomicArgs, AtomicCall};
/// use ofi_kit::core::enums::{AtomicKind, AtomicOp, Datatype};
/// let mut target: Vec<u8> = [10u32, 20].iter().flat_map(|v| v.to_ne_bytes()).collect();
/// let operand: Vec<u8> = [1u32, 2].iter().flat_map(|v| v.to_ne_bytes()).collect();
/// let mut result = vec![0u8; 8];
/// let call = AtomicCall::new(AtomicOp::Sum, Datatype::Uint32, AtomicKind::Fetch, 2);
/// apply(call, &mut target, AtomicArgs::new(&operand, &[], &mut result)).unwrap();
/// assert_eq!(target[..4], 11u32.to_ne_bytes());
/// assert_eq!(result[4..], 20u32.to_ne_bytes()); // the value before the add
/// ```
pub fn apply(call: AtomicCall, target: &mut [u8], args: AtomicArgs<'_>) -> Result<()> {
    check(call, target.len(), &args)?;
    let (op, dt, count) = (call.op, call.datatype, call.count);
    let bufs = Bufs {
        target,
        operand: args.operand,
        compare: args.compare,
        result: args.result,
        fetch: call.kind != AtomicKind::Base,
    };
    match dt {
        Datatype::Int8 => run::<i8>(op, bufs, count),
        Datatype::Uint8 => run::<u8>(op, bufs, count),
        Datatype::Int16 => run::<i16>(op, bufs, count),
        Datatype::Uint16 => run::<u16>(op, bufs, count),
        Datatype::Int32 => run::<i32>(op, bufs, count),
        Datatype::Uint32 => run::<u32>(op, bufs, count),
        Datatype::Int64 => run::<i64>(op, bufs, count),
        Datatype::Uint64 => run::<u64>(op, bufs, count),
        Datatype::Int128 => run::<i128>(op, bufs, count),
        Datatype::Uint128 => run::<u128>(op, bufs, count),
        Datatype::Float => run::<Scalar<f32>>(op, bufs, count),
        Datatype::Double => run::<Scalar<f64>>(op, bufs, count),
        Datatype::LongDouble => run::<Scalar<F80>>(op, bufs, count),
        Datatype::FloatComplex => run::<Complex<f32>>(op, bufs, count),
        Datatype::DoubleComplex => run::<Complex<f64>>(op, bufs, count),
        Datatype::LongDoubleComplex => run::<Complex<F80>>(op, bufs, count),
    }
    Ok(())
}

/// The buffers of one validated operation.
struct Bufs<'a> {
    target: &'a mut [u8],
    operand: &'a [u8],
    compare: &'a [u8],
    result: &'a mut [u8],
    /// Whether the original elements go to `result`.
    fetch: bool,
}

/// The element loop; the buffers have been checked by [`check`].
fn run<T: Elem>(op: AtomicOp, bufs: Bufs<'_>, count: usize) {
    let n = T::SIZE;
    let none: &[u8] = &[];
    let mut operands = bufs.operand.chunks_exact(n);
    let mut compares = bufs.compare.chunks_exact(n);
    let mut results = bufs.result.chunks_exact_mut(n);
    for t in bufs.target.chunks_exact_mut(n).take(count) {
        // Unused inputs read as zero (an empty slice loads as zero).
        let o = if op == AtomicOp::AtomicRead {
            none
        } else {
            operands.next().unwrap_or(none)
        };
        let c = if op.kind() == AtomicKind::Compare {
            compares.next().unwrap_or(none)
        } else {
            none
        };
        if bufs.fetch {
            if let Some(r) = results.next() {
                r.copy_from_slice(t);
            }
        }
        // `step` is `None` only for combinations `valid` rejects; leave those alone.
        match T::step(op, T::load(t), T::load(o), T::load(c)) {
            Some(Step::Keep) | None => {}
            Some(Step::Operand) => {
                for (d, s) in t.iter_mut().zip(o) {
                    *d = *s;
                }
            }
            Some(Step::Value(v)) => v.store(t),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cmp::Ordering;

    use AtomicKind as K;
    use AtomicOp as O;
    use Datatype as D;

    const KINDS: [AtomicKind; 3] = [K::Base, K::Fetch, K::Compare];

    fn code<T: std::fmt::Debug>(r: Result<T>) -> Errno {
        r.expect_err("expected an error").code()
    }

    // ---- the support table, written out from the seed ----

    /// Operations of the base calls, as the seed lists them.
    const BASE_OPS: &[AtomicOp] = &[
        O::Min,
        O::Max,
        O::Sum,
        O::Prod,
        O::Lor,
        O::Land,
        O::Bor,
        O::Band,
        O::Lxor,
        O::Bxor,
        O::AtomicWrite,
    ];
    /// Operations of the compare calls, as the seed lists them.
    const COMPARE_OPS: &[AtomicOp] = &[
        O::Cswap,
        O::CswapNe,
        O::CswapLe,
        O::CswapLt,
        O::CswapGe,
        O::CswapGt,
        O::Mswap,
    ];

    fn in_family(op: AtomicOp, kind: AtomicKind) -> bool {
        match kind {
            K::Base => BASE_OPS.contains(&op),
            K::Fetch => BASE_OPS.contains(&op) || op == O::AtomicRead,
            K::Compare => COMPARE_OPS.contains(&op),
        }
    }

    /// Per operation, one mark per datatype in C order: int8 uint8 int16 uint16 int32
    /// uint32 int64 uint64 | float double | float_complex double_complex | long_double
    /// long_double_complex | int128 uint128. `y` = supported.
    const TABLE: &[(AtomicOp, &str)] = &[
        (O::Min, "yyyyyyyy yy .. y. yy"),
        (O::Max, "yyyyyyyy yy .. y. yy"),
        (O::Sum, "yyyyyyyy yy yy yy yy"),
        (O::Prod, "yyyyyyyy yy yy yy yy"),
        (O::Lor, "yyyyyyyy yy yy yy yy"),
        (O::Land, "yyyyyyyy yy yy yy yy"),
        (O::Bor, "yyyyyyyy .. .. .. yy"),
        (O::Band, "yyyyyyyy .. .. .. yy"),
        (O::Lxor, "yyyyyyyy yy yy yy yy"),
        (O::Bxor, "yyyyyyyy .. .. .. yy"),
        (O::AtomicRead, "yyyyyyyy yy yy yy yy"),
        (O::AtomicWrite, "yyyyyyyy yy yy yy yy"),
        (O::Cswap, "yyyyyyyy yy yy yy yy"),
        (O::CswapNe, "yyyyyyyy yy yy yy yy"),
        (O::CswapLe, "yyyyyyyy yy .. y. yy"),
        (O::CswapLt, "yyyyyyyy yy .. y. yy"),
        (O::CswapGe, "yyyyyyyy yy .. y. yy"),
        (O::CswapGt, "yyyyyyyy yy .. y. yy"),
        (O::Mswap, "yyyyyyyy .. .. .. yy"),
    ];

    fn expected_support(op: AtomicOp, dt: Datatype, kind: AtomicKind) -> bool {
        let row = TABLE.iter().find(|(o, _)| *o == op).expect("row").1;
        let marks: Vec<char> = row.chars().filter(|c| !c.is_whitespace()).collect();
        assert_eq!(marks.len(), 16);
        in_family(op, kind) && marks[dt.to_raw() as usize] == 'y'
    }

    #[test]
    #[cfg(target_arch = "x86_64")] // long double is supported there only
    fn valid_and_query_agree_with_the_table() {
        assert_eq!(TABLE.len(), AtomicOp::ALL.len());
        for &op in AtomicOp::ALL {
            for &dt in Datatype::ALL {
                for kind in KINDS {
                    let want = expected_support(op, dt, kind);
                    let flags = match kind {
                        K::Base => 0,
                        K::Fetch => FETCH_ATOMIC,
                        K::Compare => COMPARE_ATOMIC,
                    };
                    let ctx = format!("{op:?} {dt:?} {kind:?}");
                    match valid(op, dt, kind) {
                        Ok(n) => {
                            assert!(want, "{ctx}: engine claims support");
                            assert_eq!(n, (isize::MAX as usize) / dt.size(), "{ctx}");
                            let attr = query(op, dt, flags).expect(&ctx);
                            assert_eq!(
                                attr,
                                AtomicAttr {
                                    count: n,
                                    size: dt.size()
                                }
                            );
                        }
                        Err(e) => {
                            assert!(!want, "{ctx}: engine refuses: {e:?}");
                            assert_eq!(e.code(), Errno::EOPNOTSUPP, "{ctx}");
                            assert_eq!(code(query(op, dt, flags)), Errno::EOPNOTSUPP);
                        }
                    }
                    // apply agrees with valid.
                    let n = dt.size();
                    let (mut t, o, c, mut r) =
                        (vec![0u8; n], vec![0u8; n], vec![0u8; n], vec![0u8; n]);
                    let res = apply(
                        AtomicCall::new(op, dt, kind, 1),
                        &mut t,
                        AtomicArgs::new(&o, &c, &mut r),
                    );
                    if want {
                        res.expect(&ctx);
                    } else {
                        assert_eq!(code(res), Errno::EOPNOTSUPP, "{ctx}");
                    }
                }
            }
        }
    }

    #[test]
    fn query_flags() {
        let q = |flags| query(O::Sum, D::Uint64, flags);
        assert_eq!(q(0).unwrap().size, 8);
        assert_eq!(q(FETCH_ATOMIC).unwrap().size, 8);
        assert_eq!(code(q(COMPARE_ATOMIC)), Errno::EOPNOTSUPP);
        assert_eq!(code(q(FETCH_ATOMIC | COMPARE_ATOMIC)), Errno::EBADFLAGS);
        assert_eq!(code(q(1 << 20)), Errno::EBADFLAGS);
        assert_eq!(code(q(FETCH_ATOMIC | (1 << 0))), Errno::EBADFLAGS);
        assert_eq!(code(q(TAGGED)), Errno::EOPNOTSUPP);
        assert_eq!(code(q(TAGGED | FETCH_ATOMIC)), Errno::EOPNOTSUPP);
        assert_eq!(query_kind(0).unwrap(), K::Base);
        assert_eq!(query_kind(FETCH_ATOMIC).unwrap(), K::Fetch);
        assert_eq!(query_kind(COMPARE_ATOMIC).unwrap(), K::Compare);
        assert_eq!(code(query(O::AtomicRead, D::Int8, 0)), Errno::EOPNOTSUPP);
        let read = query(O::AtomicRead, D::LongDoubleComplex, FETCH_ATOMIC).unwrap();
        assert_eq!(
            read,
            AtomicAttr {
                count: isize::MAX as usize / 32,
                size: 32
            }
        );
        let mswap = query(O::Mswap, D::Uint128, COMPARE_ATOMIC).unwrap();
        assert_eq!(mswap.size, 16);
        assert!(valid(O::Mswap, D::Double, K::Compare).is_err());
        assert_eq!(
            (FETCH_ATOMIC, COMPARE_ATOMIC, TAGGED),
            (0x0400_0000_0000_0000, 0x0800_0000_0000_0000, 8)
        );
    }

    // ---- exact semantics ----

    fn u64b(v: &[u64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }
    fn i32b(v: &[i32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }
    fn f64b(v: &[f64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }
    fn f64s(b: &[u8]) -> Vec<f64> {
        b.chunks(8)
            .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
            .collect()
    }
    fn i32s(b: &[u8]) -> Vec<i32> {
        b.chunks(4)
            .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
            .collect()
    }

    /// Applies with a fresh result buffer and returns (target, result).
    fn run1(
        op: AtomicOp,
        dt: Datatype,
        kind: AtomicKind,
        target: &[u8],
        operand: &[u8],
        compare: &[u8],
    ) -> (Vec<u8>, Vec<u8>) {
        let mut t = target.to_vec();
        let mut r = vec![0u8; target.len()];
        let count = target.len() / dt.size();
        apply(
            AtomicCall::new(op, dt, kind, count),
            &mut t,
            AtomicArgs::new(operand, compare, &mut r),
        )
        .unwrap();
        (t, r)
    }

    #[test]
    fn compare_swaps_put_the_compare_value_on_the_left() {
        // target = 5 everywhere; compare = 3, 5, 7; operand = 100.
        let t = i32b(&[5, 5, 5]);
        let o = i32b(&[100, 100, 100]);
        let c = i32b(&[3, 5, 7]);
        let cases = [
            (O::Cswap, [5, 100, 5]), // compare == target
            (O::CswapNe, [100, 5, 100]),
            (O::CswapLe, [100, 100, 5]), // compare <= target
            (O::CswapLt, [100, 5, 5]),   // compare < target: 3 < 5 swaps
            (O::CswapGe, [5, 100, 100]),
            (O::CswapGt, [5, 5, 100]), // compare > target: 7 > 5 swaps
        ];
        for (op, want) in cases {
            let (nt, r) = run1(op, D::Int32, K::Compare, &t, &o, &c);
            assert_eq!(i32s(&nt), want, "{op:?}");
            assert_eq!(r, t, "{op:?}: result holds the original target");
        }
        // Signed comparison: -1 < 5 for Int32 (swaps), but 0xFFFFFFFF > 5 for Uint32.
        for (dt, want) in [(D::Int32, 9), (D::Uint32, 5)] {
            let (t, o, c) = (i32b(&[5]), i32b(&[9]), i32b(&[-1]));
            let (nt, _) = run1(O::CswapLt, dt, K::Compare, &t, &o, &c);
            assert_eq!(i32s(&nt), [want], "{dt:?}");
        }
    }

    #[test]
    fn mswap_takes_masked_bits_from_the_operand() {
        let (t, r) = run1(
            O::Mswap,
            D::Uint64,
            K::Compare,
            &u64b(&[0xAAAA_0000_FFFF_1234]),
            &u64b(&[0x1111_2222_3333_4444]),
            &u64b(&[0xFFFF_0000_0000_FF00]),
        );
        assert_eq!(t, u64b(&[0x1111_0000_FFFF_4434]));
        assert_eq!(r, u64b(&[0xAAAA_0000_FFFF_1234]));
    }

    #[test]
    fn integer_arithmetic_wraps_and_logic_is_boolean() {
        let one = |op, dt: Datatype, t: i128, o: i128| -> i128 {
            let n = dt.size();
            let (t, _) = run1(
                op,
                dt,
                K::Base,
                &t.to_ne_bytes()[..n],
                &o.to_ne_bytes()[..n],
                &[],
            );
            let mut full = [0u8; 16];
            full[..n].copy_from_slice(&t);
            if !matches!(
                dt,
                D::Uint8 | D::Uint16 | D::Uint32 | D::Uint64 | D::Uint128
            ) && t[n - 1] & 0x80 != 0
            {
                full[n..].fill(0xFF);
            }
            i128::from_ne_bytes(full)
        };
        assert_eq!(one(O::Sum, D::Int8, 127, 1), -128);
        assert_eq!(one(O::Sum, D::Uint8, 255, 2), 1);
        assert_eq!(one(O::Prod, D::Int16, 300, 300), (90000i32 as i16) as i128);
        assert_eq!(one(O::Sum, D::Uint128, -1, 1), 0);
        assert_eq!(one(O::Prod, D::Int128, i128::MIN, -1), i128::MIN);
        assert_eq!(one(O::Min, D::Int64, -3, -7), -7);
        assert_eq!(one(O::Max, D::Int64, -3, -7), -3);
        assert_eq!(one(O::Min, D::Uint32, 3, -1), 3); // 0xFFFFFFFF is large unsigned
        assert_eq!(one(O::Lor, D::Int32, 0, -9), 1);
        assert_eq!(one(O::Lor, D::Int32, 0, 0), 0);
        assert_eq!(one(O::Land, D::Int32, 4, -9), 1);
        assert_eq!(one(O::Land, D::Int32, 4, 0), 0);
        assert_eq!(one(O::Lxor, D::Uint16, 4, 8), 0);
        assert_eq!(one(O::Lxor, D::Uint16, 0, 8), 1);
        assert_eq!(one(O::Bor, D::Uint8, 0x0F, 0x30), 0x3F);
        assert_eq!(one(O::Band, D::Uint8, 0x0F, 0x3C), 0x0C);
        assert_eq!(one(O::Bxor, D::Uint8, 0x0F, 0x3C), 0x33);
        assert_eq!(one(O::AtomicWrite, D::Int128, 1, i128::MAX), i128::MAX);
    }

    #[test]
    fn float_min_max_nan_and_signed_zero() {
        let nan = f64::NAN;
        let mm = |op, t: f64, o: f64| {
            f64s(&run1(op, D::Double, K::Base, &f64b(&[t]), &f64b(&[o]), &[]).0)[0]
        };
        assert_eq!(mm(O::Min, 2.0, 1.0), 1.0);
        assert_eq!(mm(O::Max, 2.0, 1.0), 2.0);
        // A NaN operand never compares less or greater: the target stays.
        assert_eq!(mm(O::Min, 2.0, nan), 2.0);
        assert_eq!(mm(O::Max, 2.0, nan), 2.0);
        // A NaN target stays NaN: nothing compares less than it either.
        assert!(mm(O::Min, nan, 1.0).is_nan());
        assert!(mm(O::Max, nan, 1.0).is_nan());
        // -0 and +0 are equal: no change either way.
        assert!(mm(O::Min, 0.0, -0.0).is_sign_positive());
        assert!(mm(O::Max, -0.0, 0.0).is_sign_negative());
    }

    #[test]
    fn float_logic_and_compare_by_value() {
        let f = |op, kind, t: f64, o: f64, c: f64| {
            f64s(&run1(op, D::Double, kind, &f64b(&[t]), &f64b(&[o]), &f64b(&[c])).0)[0]
        };
        assert_eq!(f(O::Lor, K::Base, 0.0, -0.0, 0.0), 0.0);
        assert_eq!(f(O::Lor, K::Base, 0.0, f64::NAN, 0.0), 1.0); // NaN is true
        assert_eq!(f(O::Land, K::Base, 0.5, -3.0, 0.0), 1.0);
        assert_eq!(f(O::Land, K::Base, 0.5, -0.0, 0.0), 0.0);
        assert_eq!(f(O::Lxor, K::Base, 0.5, 2.0, 0.0), 0.0);
        assert_eq!(f(O::Lxor, K::Base, 0.0, 2.0, 0.0), 1.0);
        assert_eq!(f(O::Sum, K::Base, 0.1, 0.2, 0.0), 0.1 + 0.2);
        assert_eq!(f(O::Prod, K::Base, 1.5, -4.0, 0.0), -6.0);
        // -0 == +0, so CSWAP swaps; NaN == NaN is false, so it does not.
        assert_eq!(f(O::Cswap, K::Compare, 0.0, 7.0, -0.0), 7.0);
        assert!(f(O::Cswap, K::Compare, f64::NAN, 7.0, f64::NAN).is_nan());
        assert_eq!(f(O::CswapNe, K::Compare, f64::NAN, 7.0, f64::NAN), 7.0);
        assert!(f(O::CswapLt, K::Compare, f64::NAN, 7.0, 1.0).is_nan()); // 1 < NaN is false
        assert_eq!(f(O::CswapLt, K::Compare, 2.0, 7.0, 1.0), 7.0);
        // Float arithmetic through the single-precision path.
        let t = 16_777_216f32.to_ne_bytes();
        let (nt, _) = run1(O::Sum, D::Float, K::Base, &t, &1f32.to_ne_bytes(), &[]);
        assert_eq!(f32::from_ne_bytes(nt.try_into().unwrap()), 16_777_216f32); // rounds to even
    }

    #[test]
    fn copies_keep_operand_bits() {
        // A signalling NaN payload survives WRITE and CSWAP untouched; the result holds
        // the original target.
        let snan = 0x7FF0_0000_0000_0001u64;
        let (target, operand) = (f64b(&[1.0]), u64b(&[snan]));
        for (op, kind, compare) in [
            (O::AtomicWrite, K::Fetch, Vec::new()),
            (O::CswapNe, K::Compare, f64b(&[2.0])),
        ] {
            let (t, r) = run1(op, D::Double, kind, &target, &operand, &compare);
            assert_eq!(t, operand, "{op:?}");
            assert_eq!(f64s(&r), [1.0], "{op:?}");
        }
    }

    #[test]
    fn complex_arithmetic_logic_and_equality() {
        let c = |v: &[(f32, f32)]| -> Vec<u8> {
            v.iter()
                .flat_map(|(a, b)| a.to_ne_bytes().into_iter().chain(b.to_ne_bytes()))
                .collect()
        };
        // (op, target, operand, the target after); 0+3i is true, 0+0i false, and the
        // logical operations give 1+0i or 0+0i.
        let cases = [
            (O::Prod, (1.0, 2.0), (3.0, 4.0), (-5.0, 10.0)),
            (O::Sum, (1.0, 2.0), (3.0, -4.0), (4.0, -2.0)),
            (O::Land, (0.0, 3.0), (2.0, 0.0), (1.0, 0.0)),
            (O::Lor, (0.0, -0.0), (0.0, 0.0), (0.0, 0.0)),
            (O::Lxor, (0.0, 1.0), (0.0, 0.0), (1.0, 0.0)),
        ];
        for (op, target, operand, want) in cases {
            let (t, _) = run1(
                op,
                D::FloatComplex,
                K::Base,
                &c(&[target]),
                &c(&[operand]),
                &[],
            );
            assert_eq!(t, c(&[want]), "{op:?}");
        }
        // Equality needs both parts equal: only the first element equals the compare value.
        let target = c(&[(1.0, 2.0), (1.0, 2.0)]);
        let operand = c(&[(9.0, 9.0), (9.0, 9.0)]);
        let compare = c(&[(1.0, 2.0), (1.0, 3.0)]);
        for (op, want) in [
            (O::Cswap, [(9.0, 9.0), (1.0, 2.0)]),
            (O::CswapNe, [(1.0, 2.0), (9.0, 9.0)]),
        ] {
            let (t, _) = run1(op, D::FloatComplex, K::Compare, &target, &operand, &compare);
            assert_eq!(t, c(&want), "{op:?}");
        }
        // Double complex product, exact small values.
        let d = |v: (f64, f64)| -> Vec<u8> { f64b(&[v.0, v.1]) };
        let (t, _) = run1(
            O::Prod,
            D::DoubleComplex,
            K::Fetch,
            &d((2.0, -1.0)),
            &d((0.5, 3.0)),
            &[],
        );
        assert_eq!(t, d((4.0, 5.5)));
    }

    /// An x87 extended value as 16 bytes: significand, sign+exponent, padding.
    fn ld(se: u16, m: u64, pad: u8) -> Vec<u8> {
        let mut v = m.to_ne_bytes().to_vec();
        v.extend_from_slice(&se.to_ne_bytes());
        v.extend_from_slice(&[pad; 6]);
        v
    }

    #[test]
    #[cfg(target_arch = "x86_64")] // long double is supported there only
    fn long_double_semantics() {
        let one = ld(0x3FFF, 1 << 63, 0xAB); // 1.0
        let one_half = ld(0x3FFF, 0xC000_0000_0000_0000, 0xCD); // 1.5
        let two = ld(0x4000, 1 << 63, 0xEF);
        // 1.5 + 1.0 = 2.5; the computed value keeps the target's padding.
        let (t, r) = run1(O::Sum, D::LongDouble, K::Fetch, &one_half, &one, &[]);
        assert_eq!(t, ld(0x4000, 0xA000_0000_0000_0000, 0xCD));
        assert_eq!(r, one_half);
        // 1.5 * 2 = 3
        let (t, _) = run1(O::Prod, D::LongDouble, K::Base, &one_half, &two, &[]);
        assert_eq!(t, ld(0x4000, 0xC000_0000_0000_0000, 0xCD));
        // MIN copies the operand with its padding.
        let (t, _) = run1(O::Min, D::LongDouble, K::Base, &one_half, &one, &[]);
        assert_eq!(t, one);
        let (t, _) = run1(O::Max, D::LongDouble, K::Base, &one_half, &one, &[]);
        assert_eq!(t, one_half);
        // A pseudo-denormal equals the normal of the same value: CSWAP swaps.
        let pseudo = ld(0x0000, 1 << 63, 0);
        let smallest_normal = ld(0x0001, 1 << 63, 0);
        let (t, _) = run1(
            O::Cswap,
            D::LongDouble,
            K::Compare,
            &smallest_normal,
            &two,
            &pseudo,
        );
        assert_eq!(t, two);
        // Logical results are 1.0L / 0.0L; an unnormal (unsupported) counts as true.
        let unnormal = ld(0x4000, 0x4000_0000_0000_0000, 0);
        let zero = ld(0, 0, 0x11);
        let (t, _) = run1(O::Lor, D::LongDouble, K::Base, &zero, &unnormal, &[]);
        assert_eq!(t, ld(0x3FFF, 1 << 63, 0x11));
        let (t, _) = run1(O::Land, D::LongDouble, K::Base, &zero, &unnormal, &[]);
        assert_eq!(t, ld(0, 0, 0x11));
        // Arithmetic on an unsupported encoding yields the real indefinite NaN.
        let (t, _) = run1(O::Sum, D::LongDouble, K::Base, &one, &unnormal, &[]);
        assert_eq!(t, ld(0xFFFF, 0xC000_0000_0000_0000, 0xAB));
        // CSWAP_GT: compare 2 > target 1.5 swaps.
        let (t, _) = run1(O::CswapGt, D::LongDouble, K::Compare, &one_half, &one, &two);
        assert_eq!(t, one);
    }

    /// (sign+exponent, significand) of four inputs, the product, the sum.
    type LdComplexVector = ([(u16, u64); 4], [(u16, u64); 2], [(u16, u64); 2]);

    /// Complex `long double` products and sums recorded from C (gcc, x87) computing
    /// `(ac - bd) + (ad + bc)i` and the component-wise sum: [a, b, c, d], product, sum.
    #[rustfmt::skip]
    const LD_COMPLEX: &[LdComplexVector] = &[
        ([(0xc000, 0xcb91ce375bc8fbbc), (0xbff1, 0xc6a5387777330bdb), (0xbfff, 0xe6a16a3b0d464138), (0x3ffa, 0xf814e8a25f2dd97f)], [(0x4001, 0xb7656679c655016e), (0xbffc, 0xc51922bab98f1bd5)], [(0xc001, 0x9f7141aa71360e2c), (0x3ffa, 0xf7b1960623723ff9)]),
        ([(0x3fff, 0x9a1afe878b33e968), (0x3fff, 0xb77b9aa2bb2edb20), (0x400a, 0xea959c212e9c82b1), (0x4008, 0xcc11d357c30d8b76)], [(0x400a, 0xd14bd5c090eebc46), (0x400b, 0xc6d845a6d9f5e53f)], [(0x400a, 0xeaa8df80ff8de92e), (0x4008, 0xcc6d9125146b22e4)]),
        ([(0x3ff4, 0x9e115e4b9e30691c), (0x400c, 0x8074513021da8978), (0x3ff0, 0xb729c619c60a3cab), (0xbffa, 0xca0fe75d2a9eba0c)], [(0x4007, 0xcac785f11b6a424d), (0x3ffd, 0xb7cc52066aa2ac26)], [(0x3ff4, 0xa983faad3a910ce7), (0x400c, 0x80741eac28033ed0)]),
        ([(0xc004, 0x8a0a8c9632ea6928), (0x3ffd, 0xf7f35634f0e3cd97), (0xbffc, 0xe4cc4132f7108e96), (0x4008, 0xdc76f18a0585a01c)], [(0xc007, 0xd1ad55eace6829ce), (0xc00d, 0xedc29f3f1b76375d)], [(0xc004, 0x8aef58d765e179b7), (0x4008, 0xdc95eff4cc23bc96)]),
        ([(0x400a, 0xa54cb864ef901b93), (0x4000, 0xcd25deb354f46a69), (0xbff0, 0xb52a43abad8d194a), (0x4005, 0xdaf84e6b4f596727)], [(0xc007, 0xaf87da7d11490d00), (0x4011, 0x8d63a9fa1de9bba6)], [(0x400a, 0xa54cb837a4ff30a8), (0x4005, 0xe1617d60ea010a7a)]),
        // (inf + 1i)(0 + 1i): no infinity recovery, the real part is NaN.
        ([(0x7fff, 0x8000000000000000), (0x3fff, 0x8000000000000000), (0x0000, 0x0000000000000000), (0x3fff, 0x8000000000000000)], [(0xffff, 0xc000000000000000), (0x7fff, 0x8000000000000000)], [(0x7fff, 0x8000000000000000), (0x4000, 0x8000000000000000)]),
    ];

    #[test]
    #[cfg(target_arch = "x86_64")] // long double is supported there only
    fn long_double_complex_matches_recorded_results() {
        let pair = |a: (u16, u64), b: (u16, u64)| -> Vec<u8> {
            let mut v = ld(a.0, a.1, 0);
            v.extend(ld(b.0, b.1, 0));
            v
        };
        for (i, (ins, prod, sum)) in LD_COMPLEX.iter().enumerate() {
            let (t, o) = (pair(ins[0], ins[1]), pair(ins[2], ins[3]));
            let (p, _) = run1(O::Prod, D::LongDoubleComplex, K::Base, &t, &o, &[]);
            assert_eq!(p, pair(prod[0], prod[1]), "vector {i}: product");
            let (s, _) = run1(O::Sum, D::LongDoubleComplex, K::Base, &t, &o, &[]);
            assert_eq!(s, pair(sum[0], sum[1]), "vector {i}: sum");
        }
    }

    #[test]
    fn unaligned_elements_and_longer_buffers() {
        // A u64 at offset 3 of a larger buffer; bytes around it stay.
        let mut buf = [0x55u8; 16];
        buf[3..11].copy_from_slice(&40u64.to_ne_bytes());
        let mut res = vec![0u8; 9];
        apply(
            AtomicCall::new(O::Sum, D::Uint64, K::Fetch, 1),
            &mut buf[3..],
            AtomicArgs::new(&2u64.to_ne_bytes(), &[], &mut res),
        )
        .unwrap();
        assert_eq!(&buf[3..11], &42u64.to_ne_bytes());
        assert_eq!(&buf[..3], &[0x55; 3]);
        assert_eq!(&buf[11..], &[0x55; 5]);
        assert_eq!(&res[..8], &40u64.to_ne_bytes());
        assert_eq!(res[8], 0);
    }

    #[test]
    fn unused_buffers_may_be_empty_and_count_zero_is_a_no_op() {
        let mut t = u64b(&[7, 8]);
        let mut r = vec![0u8; 16];
        apply(
            AtomicCall::new(O::AtomicRead, D::Uint64, K::Fetch, 2),
            &mut t,
            AtomicArgs::new(&[], &[], &mut r),
        )
        .unwrap();
        assert_eq!(r, u64b(&[7, 8]));
        apply(
            AtomicCall::new(O::Sum, D::Uint64, K::Base, 2),
            &mut t,
            AtomicArgs::new(&u64b(&[1, 1]), &[], &mut []),
        )
        .unwrap();
        assert_eq!(t, u64b(&[8, 9]));
        apply(
            AtomicCall::new(O::Sum, D::Uint64, K::Base, 0),
            &mut [],
            AtomicArgs::new(&[], &[], &mut []),
        )
        .unwrap();
        apply(
            AtomicCall::new(O::Cswap, D::Uint64, K::Compare, 0),
            &mut [],
            AtomicArgs::new(&[], &[], &mut []),
        )
        .unwrap();
        // Unsupported stays unsupported with count 0.
        assert_eq!(
            code(apply(
                AtomicCall::new(O::Bor, D::Float, K::Base, 0),
                &mut [],
                AtomicArgs::new(&[], &[], &mut [])
            )),
            Errno::EOPNOTSUPP
        );
    }

    #[test]
    fn count_beyond_the_limit_is_emsgsize() {
        let max = max_count(D::Int128);
        assert_eq!(max, isize::MAX as usize / 16);
        let r = apply(
            AtomicCall::new(O::Sum, D::Int128, K::Base, max + 1),
            &mut [],
            AtomicArgs::new(&[], &[], &mut []),
        );
        assert_eq!(code(r), Errno::EMSGSIZE);
        let r = apply(
            AtomicCall::new(O::Sum, D::Int8, K::Base, usize::MAX),
            &mut [],
            AtomicArgs::new(&[], &[], &mut []),
        );
        assert_eq!(code(r), Errno::EMSGSIZE);
    }

    #[test]
    fn short_buffers_are_einval_and_nothing_changes() {
        let count = 3;
        for &op in AtomicOp::ALL {
            for &dt in Datatype::ALL {
                for kind in KINDS {
                    if valid(op, dt, kind).is_err() {
                        continue;
                    }
                    let bytes = count * dt.size();
                    let uses = [
                        true,
                        op != O::AtomicRead,
                        kind == K::Compare,
                        kind != K::Base,
                    ];
                    for (short, &used) in uses.iter().enumerate() {
                        if !used {
                            continue;
                        }
                        let len = |i: usize| if i == short { bytes - 1 } else { bytes };
                        let mut t: Vec<u8> = (0..len(0)).map(|i| i as u8 ^ 0x5A).collect();
                        let o = vec![0x11u8; len(1)];
                        let c = vec![0x22u8; len(2)];
                        let mut r = vec![0x33u8; len(3)];
                        let (t0, r0) = (t.clone(), r.clone());
                        let res = apply(
                            AtomicCall::new(op, dt, kind, count),
                            &mut t,
                            AtomicArgs::new(&o, &c, &mut r),
                        );
                        let ctx = format!("{op:?} {dt:?} {kind:?} short buffer {short}");
                        assert_eq!(code(res), Errno::EINVAL, "{ctx}");
                        assert_eq!(t, t0, "{ctx}");
                        assert_eq!(r, r0, "{ctx}");
                    }
                }
            }
        }
    }

    // ---- property test against an independent reference model ----

    /// How the reference model sees a datatype.
    #[derive(Clone, Copy, Debug)]
    enum Model {
        Int { bits: u32, signed: bool },
        Real { single: bool },
        Cplx { single: bool },
    }

    fn model_of(dt: Datatype) -> Model {
        let int = |signed| Model::Int {
            bits: dt.size() as u32 * 8,
            signed,
        };
        match dt {
            D::Int8 | D::Int16 | D::Int32 | D::Int64 | D::Int128 => int(true),
            D::Uint8 | D::Uint16 | D::Uint32 | D::Uint64 | D::Uint128 => int(false),
            D::Float => Model::Real { single: true },
            D::Double => Model::Real { single: false },
            D::FloatComplex => Model::Cplx { single: true },
            D::DoubleComplex => Model::Cplx { single: false },
            D::LongDouble | D::LongDoubleComplex => unreachable!("not modelled"),
        }
    }

    /// Datatypes the model covers (long double has its own tests above).
    const MODELLED: [Datatype; 14] = [
        D::Int8,
        D::Uint8,
        D::Int16,
        D::Uint16,
        D::Int32,
        D::Uint32,
        D::Int64,
        D::Uint64,
        D::Float,
        D::Double,
        D::FloatComplex,
        D::DoubleComplex,
        D::Int128,
        D::Uint128,
    ];

    /// Little-endian bytes as an unsigned integer (the test runs on x86_64).
    fn le_uint(b: &[u8]) -> u128 {
        b.iter()
            .enumerate()
            .fold(0, |v, (i, x)| v | u128::from(*x) << (8 * i))
    }

    fn le_bytes(v: u128, n: usize) -> Vec<u8> {
        (0..n).map(|i| (v >> (8 * i)) as u8).collect()
    }

    fn real_get(b: &[u8], single: bool) -> f64 {
        if single {
            f64::from(f32::from_le_bytes(b[..4].try_into().unwrap()))
        } else {
            f64::from_le_bytes(b[..8].try_into().unwrap())
        }
    }

    fn real_put(x: f64, single: bool) -> Vec<u8> {
        if single {
            (x as f32).to_le_bytes().to_vec()
        } else {
            x.to_le_bytes().to_vec()
        }
    }

    /// The seed's pseudo-code for one element: the new target bytes.
    fn reference(op: AtomicOp, dt: Datatype, t: &[u8], o: &[u8], c: &[u8]) -> Vec<u8> {
        let copy = |swap: bool| if swap { o.to_vec() } else { t.to_vec() };
        let n = dt.size();
        match model_of(dt) {
            Model::Int { bits, signed } => {
                let mask = if bits == 128 {
                    u128::MAX
                } else {
                    (1u128 << bits) - 1
                };
                let (tv, ov, cv) = (le_uint(t), le_uint(o), le_uint(c));
                let widen = |v: u128| -> i128 {
                    if signed {
                        ((v << (128 - bits)) as i128) >> (128 - bits)
                    } else {
                        // Unsigned order: shift the range so that i128 order matches.
                        (v ^ (1u128 << 127)) as i128
                    }
                };
                let ord = |x: u128, y: u128| widen(x).cmp(&widen(y));
                let val = |v: u128| le_bytes(v & mask, n);
                let flag = |b: bool| val(u128::from(b));
                match op {
                    O::Min => copy(ord(ov, tv) == Ordering::Less),
                    O::Max => copy(ord(ov, tv) == Ordering::Greater),
                    O::Sum => val(tv.wrapping_add(ov)),
                    O::Prod => val(tv.wrapping_mul(ov)),
                    O::Lor => flag(tv != 0 || ov != 0),
                    O::Land => flag(tv != 0 && ov != 0),
                    O::Lxor => flag((tv != 0 && ov == 0) || (tv == 0 && ov != 0)),
                    O::Bor => val(tv | ov),
                    O::Band => val(tv & ov),
                    O::Bxor => val(tv ^ ov),
                    O::AtomicRead => t.to_vec(),
                    O::AtomicWrite => o.to_vec(),
                    O::Cswap => copy(cv == tv),
                    O::CswapNe => copy(cv != tv),
                    O::CswapLe => copy(ord(cv, tv) != Ordering::Greater),
                    O::CswapLt => copy(ord(cv, tv) == Ordering::Less),
                    O::CswapGe => copy(ord(cv, tv) != Ordering::Less),
                    O::CswapGt => copy(ord(cv, tv) == Ordering::Greater),
                    O::Mswap => val((ov & cv) | (tv & !cv)),
                }
            }
            Model::Real { single } => {
                let r = |x: f64| if single { f64::from(x as f32) } else { x };
                let (tv, ov, cv) = (
                    real_get(t, single),
                    real_get(o, single),
                    real_get(c, single),
                );
                let val = |x: f64| real_put(x, single);
                let flag = |b: bool| val(if b { 1.0 } else { 0.0 });
                match op {
                    O::Min => copy(ov < tv),
                    O::Max => copy(ov > tv),
                    O::Sum => val(r(tv + ov)),
                    O::Prod => val(r(tv * ov)),
                    O::Lor => flag(tv != 0.0 || ov != 0.0),
                    O::Land => flag(tv != 0.0 && ov != 0.0),
                    O::Lxor => flag((tv != 0.0) != (ov != 0.0)),
                    O::AtomicRead => t.to_vec(),
                    O::AtomicWrite => o.to_vec(),
                    O::Cswap => copy(cv == tv),
                    O::CswapNe => copy(cv != tv),
                    O::CswapLe => copy(cv <= tv),
                    O::CswapLt => copy(cv < tv),
                    O::CswapGe => copy(cv >= tv),
                    O::CswapGt => copy(cv > tv),
                    O::Bor | O::Band | O::Bxor | O::Mswap => unreachable!("refused"),
                }
            }
            Model::Cplx { single } => {
                let w = n / 2;
                let r = |x: f64| if single { f64::from(x as f32) } else { x };
                let get = |b: &[u8]| (real_get(&b[..w], single), real_get(&b[w..], single));
                let (tv, ov, cv) = (get(t), get(o), get(c));
                let val = |(a, b): (f64, f64)| {
                    let mut v = real_put(a, single);
                    v.extend(real_put(b, single));
                    v
                };
                let truth = |(a, b): (f64, f64)| a != 0.0 || b != 0.0;
                let flag = |b: bool| val((if b { 1.0 } else { 0.0 }, 0.0));
                match op {
                    O::Sum => val((r(tv.0 + ov.0), r(tv.1 + ov.1))),
                    O::Prod => val((
                        r(r(tv.0 * ov.0) - r(tv.1 * ov.1)),
                        r(r(tv.0 * ov.1) + r(tv.1 * ov.0)),
                    )),
                    O::Lor => flag(truth(tv) || truth(ov)),
                    O::Land => flag(truth(tv) && truth(ov)),
                    O::Lxor => flag(truth(tv) != truth(ov)),
                    O::AtomicRead => t.to_vec(),
                    O::AtomicWrite => o.to_vec(),
                    O::Cswap => copy(cv == tv),
                    O::CswapNe => copy(cv != tv),
                    _ => unreachable!("refused"),
                }
            }
        }
    }

    /// Engine and model agree: equal bytes, or (floating components) both NaN, whose
    /// payload the hardware may pick from either operand.
    fn same(dt: Datatype, a: &[u8], b: &[u8]) -> bool {
        match model_of(dt) {
            Model::Int { .. } => a == b,
            Model::Real { single } | Model::Cplx { single } => {
                let w = if single { 4 } else { 8 };
                a.chunks(w).zip(b.chunks(w)).all(|(x, y)| {
                    x == y || (real_get(x, single).is_nan() && real_get(y, single).is_nan())
                })
            }
        }
    }

    /// How one generated element is made.
    #[derive(Clone, Debug)]
    struct Gen {
        how: u8,
        raw: [u8; 16],
        small: (i8, i8),
    }

    fn gen() -> impl Strategy<Value = Gen> {
        (0u8..4, any::<[u8; 16]>(), any::<(i8, i8)>()).prop_map(|(how, raw, small)| Gen {
            how,
            raw,
            small,
        })
    }

    /// Builds one element of `dt` from `g`; `like` is the target element (how == 2
    /// copies it, to make equal comparisons common).
    fn build(dt: Datatype, g: &Gen, like: Option<&[u8]>) -> Vec<u8> {
        let n = dt.size();
        let specials = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            0.5,
        ];
        let pick = |k: i8| specials[(k as u8 % 8) as usize];
        match (g.how, model_of(dt)) {
            (2, _) if like.is_some() => like.unwrap_or_default().to_vec(),
            (1, Model::Int { .. }) => le_bytes(g.small.0 as i128 as u128, n),
            (1, Model::Real { single }) => real_put(f64::from(g.small.0), single),
            (1, Model::Cplx { single }) => {
                let mut v = real_put(f64::from(g.small.0), single);
                v.extend(real_put(f64::from(g.small.1), single));
                v
            }
            (3, Model::Int { bits, .. }) => {
                // 0, all ones, 1, only the top bit.
                let v = [0, u128::MAX, 1, 1u128 << (bits - 1)][(g.small.0 as u8 % 4) as usize];
                le_bytes(v, n)
            }
            (3, Model::Real { single }) => real_put(pick(g.small.0), single),
            (3, Model::Cplx { single }) => {
                let mut v = real_put(pick(g.small.0), single);
                v.extend(real_put(pick(g.small.1), single));
                v
            }
            _ => g.raw[..n].to_vec(),
        }
    }

    #[derive(Clone, Debug)]
    struct Case {
        op: AtomicOp,
        dt: Datatype,
        kind: AtomicKind,
        elems: Vec<(Gen, Gen, Gen)>,
        tail: Vec<u8>,
    }

    fn case() -> impl Strategy<Value = Case> {
        (
            0..AtomicOp::ALL.len(),
            0..MODELLED.len(),
            0usize..5,
            proptest::collection::vec((gen(), gen(), gen()), 0..6),
            proptest::collection::vec(any::<u8>(), 0..4),
        )
            .prop_map(|(o, d, k, elems, tail)| {
                let op = AtomicOp::ALL[o];
                // Mostly the op's own family, sometimes any family.
                let kind = match (k, op.kind()) {
                    (0, _) => K::Base,
                    (1, _) => K::Fetch,
                    (2, _) => K::Compare,
                    (3, K::Base) => K::Fetch,
                    (_, own) => own,
                };
                Case {
                    op,
                    dt: MODELLED[d],
                    kind,
                    elems,
                    tail,
                }
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        #[cfg(target_endian = "little")] // the model reads little-endian bytes
        fn engine_matches_reference_model(case in case()) {
            let Case { op, dt, kind, elems, tail } = case;
            let n = dt.size();
            let count = elems.len();
            let mut target = Vec::new();
            let mut operand = Vec::new();
            let mut compare = Vec::new();
            for (gt, go, gc) in &elems {
                let t = build(dt, gt, None);
                operand.extend(build(dt, go, Some(&t)));
                compare.extend(build(dt, gc, Some(&t)));
                target.extend(t);
            }
            target.extend(&tail);
            let mut result = vec![0xEEu8; count * n + 1];
            let (target0, result0) = (target.clone(), result.clone());
            let got = apply(AtomicCall::new(op, dt, kind, count), &mut target, AtomicArgs::new(&operand, &compare, &mut result));
            if valid(op, dt, kind).is_err() {
                prop_assert_eq!(code(got), Errno::EOPNOTSUPP);
                prop_assert_eq!(&target, &target0);
                prop_assert_eq!(&result, &result0);
                return Ok(());
            }
            prop_assert!(got.is_ok(), "{:?}", got);
            for i in 0..count {
                let r = i * n..(i + 1) * n;
                let want = reference(op, dt, &target0[r.clone()], &operand[r.clone()], &compare[r.clone()]);
                prop_assert!(
                    same(dt, &target[r.clone()], &want),
                    "element {}: engine {:02x?} model {:02x?}", i, &target[r], want
                );
            }
            prop_assert_eq!(&target[count * n..], &tail[..]);
            if kind == K::Base {
                prop_assert_eq!(&result, &result0);
            } else {
                prop_assert_eq!(&result[..count * n], &target0[..count * n]);
                prop_assert_eq!(result[count * n], 0xEE);
            }
        }
    }
}
