//! The element types of the engine and what one operation does to one element.
//!
//! Integers are the Rust integer of the same width and signedness (wrapping arithmetic);
//! `float`/`double` are `f32`/`f64`; complex numbers are a `(real, imaginary)` pair of
//! their component type; `long double` is [`F80`]. Elements are read from and written to
//! byte slices in native order with no alignment requirement. A slice shorter than the
//! element reads as if zero-padded and is written only as far as it reaches, so nothing
//! here can panic (the engine always passes exact element-sized slices).

use std::cmp::Ordering;

use ofi_core::enums::AtomicOp;

use super::f80::F80;

/// What one operation does to one target element.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Step<T> {
    /// Leave the target element as it is.
    Keep,
    /// Replace the target element with the operand element's bytes, unchanged.
    Operand,
    /// Replace the target element with a computed value.
    Value(T),
}

/// `Operand` when `cond` holds, else `Keep`: the shape of MIN/MAX and the swaps.
fn swap_if<T>(cond: bool) -> Step<T> {
    if cond {
        Step::Operand
    } else {
        Step::Keep
    }
}

/// Copies `src` into the start of `dst`, as far as both reach.
fn copy_prefix(dst: &mut [u8], src: &[u8]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = *s;
    }
}

/// An element type the engine operates on.
pub(crate) trait Elem: Copy {
    /// Size in bytes of one element (equal to `Datatype::size()` of its datatype).
    const SIZE: usize;
    /// Reads one element from `b` (native byte order, any alignment).
    fn load(b: &[u8]) -> Self;
    /// Writes one element into `b`.
    fn store(self, b: &mut [u8]);
    /// The effect of `op` on the target element `t`, given the operand `o` and the
    /// compare value `c` (zero where the operation takes none). `None` when the
    /// operation does not apply to this type.
    fn step(op: AtomicOp, t: Self, o: Self, c: Self) -> Option<Step<Self>>;
}

/// `SIZE`, `load` and `store` of a primitive number type `$t` (native byte order, any
/// alignment), for the element traits of integers and IEEE reals alike.
macro_rules! ne_bytes_load_store {
    ($t:ty) => {
        const SIZE: usize = std::mem::size_of::<$t>();

        fn load(b: &[u8]) -> Self {
            let mut raw = [0u8; std::mem::size_of::<$t>()];
            copy_prefix(&mut raw, b);
            <$t>::from_ne_bytes(raw)
        }

        fn store(self, b: &mut [u8]) {
            copy_prefix(b, &self.to_ne_bytes());
        }
    };
}

macro_rules! int_elem {
    ($($t:ty),* $(,)?) => {$(
        impl Elem for $t {
            ne_bytes_load_store!($t);

            fn step(op: AtomicOp, t: Self, o: Self, c: Self) -> Option<Step<Self>> {
                Some(match op {
                    AtomicOp::Min => swap_if(o < t),
                    AtomicOp::Max => swap_if(o > t),
                    AtomicOp::Sum => Step::Value(t.wrapping_add(o)),
                    AtomicOp::Prod => Step::Value(t.wrapping_mul(o)),
                    AtomicOp::Lor => Step::Value(<$t>::from(t != 0 || o != 0)),
                    AtomicOp::Land => Step::Value(<$t>::from(t != 0 && o != 0)),
                    AtomicOp::Lxor => Step::Value(<$t>::from((t != 0) != (o != 0))),
                    AtomicOp::Bor => Step::Value(t | o),
                    AtomicOp::Band => Step::Value(t & o),
                    AtomicOp::Bxor => Step::Value(t ^ o),
                    AtomicOp::AtomicRead => Step::Keep,
                    AtomicOp::AtomicWrite => Step::Operand,
                    AtomicOp::Cswap => swap_if(c == t),
                    AtomicOp::CswapNe => swap_if(c != t),
                    AtomicOp::CswapLe => swap_if(c <= t),
                    AtomicOp::CswapLt => swap_if(c < t),
                    AtomicOp::CswapGe => swap_if(c >= t),
                    AtomicOp::CswapGt => swap_if(c > t),
                    AtomicOp::Mswap => Step::Value((o & c) | (t & !c)),
                })
            }
        }
    )*};
}

int_elem!(i8, u8, i16, u16, i32, u32, i64, u64, i128, u128);

/// A real floating-point component type: `f32`, `f64` or [`F80`].
pub(crate) trait Real: Copy {
    /// Size in bytes.
    const SIZE: usize;
    /// Positive zero.
    const ZERO: Self;
    /// One.
    const ONE: Self;
    /// Reads a value (native order).
    fn load(b: &[u8]) -> Self;
    /// Writes a value (native order).
    fn store(self, b: &mut [u8]);
    /// Sum, rounded to the type.
    fn add(self, o: Self) -> Self;
    /// Difference, rounded to the type.
    fn sub(self, o: Self) -> Self;
    /// Product, rounded to the type.
    fn mul(self, o: Self) -> Self;
    /// IEEE comparison; `None` when unordered.
    fn compare(self, o: Self) -> Option<Ordering>;

    /// C truthiness, `x != 0`: NaN is true.
    fn truth(self) -> bool {
        self.compare(Self::ZERO) != Some(Ordering::Equal)
    }

    /// `1` for true, `+0` for false (C's conversion of a logical result).
    fn from_bool(b: bool) -> Self {
        if b {
            Self::ONE
        } else {
            Self::ZERO
        }
    }
}

macro_rules! ieee_real {
    ($($t:ty),*) => {$(
        impl Real for $t {
            ne_bytes_load_store!($t);
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;

            fn add(self, o: Self) -> Self {
                self + o
            }

            fn sub(self, o: Self) -> Self {
                self - o
            }

            fn mul(self, o: Self) -> Self {
                self * o
            }

            fn compare(self, o: Self) -> Option<Ordering> {
                self.partial_cmp(&o)
            }
        }
    )*};
}

ieee_real!(f32, f64);

impl Real for F80 {
    const SIZE: usize = 16;
    const ZERO: Self = F80::ZERO;
    const ONE: Self = F80::ONE;

    fn load(b: &[u8]) -> Self {
        F80::from_bytes(b)
    }

    /// Writes the 10 value bytes; the 6 padding bytes keep what they held.
    fn store(self, b: &mut [u8]) {
        self.write_bytes(b);
    }

    fn add(self, o: Self) -> Self {
        F80::add(self, o)
    }

    fn sub(self, o: Self) -> Self {
        F80::sub(self, o)
    }

    fn mul(self, o: Self) -> Self {
        F80::mul(self, o)
    }

    fn compare(self, o: Self) -> Option<Ordering> {
        self.partial_cmp(o)
    }

    fn truth(self) -> bool {
        self.is_true()
    }
}

/// A real (non-complex) floating-point element.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Scalar<R>(pub(crate) R);

impl<R: Real> Elem for Scalar<R> {
    const SIZE: usize = R::SIZE;

    fn load(b: &[u8]) -> Self {
        Scalar(R::load(b))
    }

    fn store(self, b: &mut [u8]) {
        self.0.store(b)
    }

    fn step(op: AtomicOp, t: Self, o: Self, c: Self) -> Option<Step<Self>> {
        let (t, o, c) = (t.0, o.0, c.0);
        let is = |x: R, y: R, want: &[Ordering]| x.compare(y).is_some_and(|r| want.contains(&r));
        use Ordering::{Equal, Greater, Less};
        Some(match op {
            // The seed's `if (buf < addr) addr = buf`: a NaN on either side compares
            // false, so the target stays.
            AtomicOp::Min => swap_if(is(o, t, &[Less])),
            AtomicOp::Max => swap_if(is(o, t, &[Greater])),
            AtomicOp::Sum => Step::Value(Scalar(t.add(o))),
            AtomicOp::Prod => Step::Value(Scalar(t.mul(o))),
            AtomicOp::Lor => Step::Value(Scalar(R::from_bool(t.truth() || o.truth()))),
            AtomicOp::Land => Step::Value(Scalar(R::from_bool(t.truth() && o.truth()))),
            AtomicOp::Lxor => Step::Value(Scalar(R::from_bool(t.truth() != o.truth()))),
            AtomicOp::AtomicRead => Step::Keep,
            AtomicOp::AtomicWrite => Step::Operand,
            AtomicOp::Cswap => swap_if(is(c, t, &[Equal])),
            AtomicOp::CswapNe => swap_if(!is(c, t, &[Equal])),
            AtomicOp::CswapLe => swap_if(is(c, t, &[Less, Equal])),
            AtomicOp::CswapLt => swap_if(is(c, t, &[Less])),
            AtomicOp::CswapGe => swap_if(is(c, t, &[Greater, Equal])),
            AtomicOp::CswapGt => swap_if(is(c, t, &[Greater])),
            AtomicOp::Bor | AtomicOp::Band | AtomicOp::Bxor | AtomicOp::Mswap => return None,
        })
    }
}

/// A complex element: the real part, then the imaginary part.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Complex<R> {
    pub(crate) re: R,
    pub(crate) im: R,
}

impl<R: Real> Complex<R> {
    /// C truthiness of a complex value: true unless both parts equal zero.
    fn truth(self) -> bool {
        self.re.truth() || self.im.truth()
    }

    /// A logical result: `1 + 0i` or `0 + 0i`.
    fn from_bool(b: bool) -> Self {
        Complex {
            re: R::from_bool(b),
            im: R::ZERO,
        }
    }

    /// Equality of both parts (IEEE: NaN is unequal to everything).
    fn equals(self, o: Self) -> bool {
        self.re.compare(o.re) == Some(Ordering::Equal)
            && self.im.compare(o.im) == Some(Ordering::Equal)
    }
}

impl<R: Real> Elem for Complex<R> {
    const SIZE: usize = 2 * R::SIZE;

    fn load(b: &[u8]) -> Self {
        let (re, im) = b.split_at(b.len().min(R::SIZE));
        Complex {
            re: R::load(re),
            im: R::load(im),
        }
    }

    fn store(self, b: &mut [u8]) {
        let (re, im) = b.split_at_mut(b.len().min(R::SIZE));
        self.re.store(re);
        self.im.store(im);
    }

    fn step(op: AtomicOp, t: Self, o: Self, c: Self) -> Option<Step<Self>> {
        Some(match op {
            AtomicOp::Sum => Step::Value(Complex {
                re: t.re.add(o.re),
                im: t.im.add(o.im),
            }),
            // (a + bi)(c + di) = (ac - bd) + (ad + bc)i, each product and sum rounded
            // to the component type, with no special recovery of infinities.
            AtomicOp::Prod => Step::Value(Complex {
                re: t.re.mul(o.re).sub(t.im.mul(o.im)),
                im: t.re.mul(o.im).add(t.im.mul(o.re)),
            }),
            AtomicOp::Lor => Step::Value(Self::from_bool(t.truth() || o.truth())),
            AtomicOp::Land => Step::Value(Self::from_bool(t.truth() && o.truth())),
            AtomicOp::Lxor => Step::Value(Self::from_bool(t.truth() != o.truth())),
            AtomicOp::AtomicRead => Step::Keep,
            AtomicOp::AtomicWrite => Step::Operand,
            AtomicOp::Cswap => swap_if(c.equals(t)),
            AtomicOp::CswapNe => swap_if(!c.equals(t)),
            AtomicOp::Min
            | AtomicOp::Max
            | AtomicOp::CswapLe
            | AtomicOp::CswapLt
            | AtomicOp::CswapGe
            | AtomicOp::CswapGt
            | AtomicOp::Bor
            | AtomicOp::Band
            | AtomicOp::Bxor
            | AtomicOp::Mswap => return None,
        })
    }
}
