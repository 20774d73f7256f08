//! The cost of the plugin boundary on the data path: one call through the C-ABI tables
//! (public wrapper → table slot → adapter → provider method) against the same trait
//! method called directly.
//!
//! The provider here is trivial (its methods are `#[inline(never)]`, so the direct
//! variant still makes a real call): what is measured is the boundary itself.
//!
//! Run: `cargo bench -p ofi-core --bench boundary -- --warm-up-time 1 --measurement-time 3`

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{criterion_group, criterion_main, Criterion};
use ofi_core::cntr::CntrAttr;
use ofi_core::cq::{CqAttr, CqBuf, CqError};
use ofi_core::provider::{
    init_builtin, BindTarget, CntrOps, CqOps, Desc, DomainOps, EndpointOps, FabricOps, Host,
    Provider, Unsupported,
};
use ofi_core::{EpType, Errno, Error, Info, OpFlags, Result, Version};

struct Bench;

impl Provider for Bench {
    const NAME: &'static str = "bench";
    const VERSION: Version = Version::new(1, 0);
    type Fabric = BFabric;

    fn init(_host: &Host) -> Result<Self> {
        Ok(Bench)
    }

    fn info_templates(&self) -> Vec<Info> {
        vec![Info::new()
            .with_ep_type(EpType::Dgram)
            .with_provider("bench")]
    }

    fn fabric(&self, _info: &Info) -> Result<BFabric> {
        Ok(BFabric)
    }
}

struct BFabric;

impl FabricOps for BFabric {
    type Domain = BDomain;
    type PassiveEp = Unsupported;
    type Eq = Unsupported;
    type Wait = Unsupported;

    fn domain(&self, _info: &Info, _context: usize) -> Result<BDomain> {
        Ok(BDomain)
    }
}

struct BDomain;

impl DomainOps<BFabric> for BDomain {
    type Endpoint = BEp;
    type Cq = BCq;
    type Cntr = BCntr;
    type Av = Unsupported;
    type Mr = Unsupported;

    fn endpoint(&self, _info: &Info, _context: usize, _flags: u64) -> Result<BEp> {
        Ok(BEp {
            sent: AtomicU64::new(0),
        })
    }

    fn cq_open(&self, _attr: &CqAttr, _context: usize) -> Result<BCq> {
        Ok(BCq)
    }

    fn cntr_open(&self, _attr: &CntrAttr, _context: usize) -> Result<BCntr> {
        Ok(BCntr {
            v: AtomicU64::new(42),
        })
    }
}

struct BEp {
    sent: AtomicU64,
}

impl EndpointOps<BFabric> for BEp {
    fn bind(&self, _target: BindTarget<'_, BFabric>, _flags: OpFlags) -> Result<()> {
        Ok(())
    }

    #[inline(never)]
    unsafe fn inject(&self, _buf: *const u8, _len: usize, _dest: u64) -> Result<()> {
        self.sent.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    #[inline(never)]
    unsafe fn send(
        &self,
        _buf: *const u8,
        _len: usize,
        _desc: Desc,
        _dest: u64,
        _context: usize,
    ) -> Result<()> {
        Err(Error::code_only(Errno::EAGAIN))
    }
}

struct BCq;

impl CqOps for BCq {
    fn read(&self, _buf: CqBuf<'_>, _src: Option<&mut [u64]>) -> Result<usize> {
        Err(Error::code_only(Errno::EAGAIN))
    }

    fn readerr(&self, _flags: u64) -> Result<CqError> {
        Err(Error::code_only(Errno::EAGAIN))
    }
}

struct BCntr {
    v: AtomicU64,
}

impl CntrOps for BCntr {
    #[inline(never)]
    fn read(&self) -> u64 {
        self.v.load(Ordering::Relaxed)
    }
    fn readerr(&self) -> u64 {
        0
    }
    fn add(&self, value: u64) -> Result<()> {
        self.v.fetch_add(value, Ordering::Relaxed);
        Ok(())
    }
    fn set(&self, value: u64) -> Result<()> {
        self.v.store(value, Ordering::Relaxed);
        Ok(())
    }
}

fn boundary(c: &mut Criterion) {
    let h = init_builtin::<Bench>().expect("bench provider");
    let info = Info::new()
        .with_ep_type(EpType::Dgram)
        .with_provider("bench");
    let fabric = h.open_fabric(&info).unwrap();
    let domain = fabric.domain(&info).unwrap();
    let cntr = domain.cntr_open(&CntrAttr::default()).unwrap();
    let ep = domain.endpoint(&info).unwrap();

    let direct_cntr = BCntr {
        v: AtomicU64::new(42),
    };
    let direct_ep = BEp {
        sent: AtomicU64::new(0),
    };

    let mut g = c.benchmark_group("boundary");
    g.bench_function("cntr.read/tables", |b| {
        b.iter(|| black_box(cntr.read().unwrap()))
    });
    g.bench_function("cntr.read/direct", |b| {
        b.iter(|| black_box(black_box(&direct_cntr).read()))
    });
    g.bench_function("inject0/tables", |b| {
        b.iter(|| ep.inject(black_box(&[]), black_box(0)).unwrap())
    });
    g.bench_function("inject0/direct", |b| {
        b.iter(|| {
            // SAFETY: a zero-length buffer; the trivial provider touches nothing.
            unsafe { black_box(&direct_ep).inject(black_box([].as_ptr()), 0, black_box(0)) }
                .unwrap()
        })
    });
    g.bench_function("send-eagain/tables", |b| {
        b.iter(|| {
            // SAFETY: the trivial provider touches nothing.
            unsafe { ep.send(black_box([].as_ptr()), 0, std::ptr::null_mut(), 0, 0) }.unwrap_err()
        })
    });
    g.bench_function("send-eagain/direct", |b| {
        b.iter(|| {
            // SAFETY: as above.
            unsafe {
                black_box(&direct_ep).send(black_box([].as_ptr()), 0, std::ptr::null_mut(), 0, 0)
            }
            .unwrap_err()
        })
    });
    g.finish();
}

criterion_group!(benches, boundary);
criterion_main!(benches);
