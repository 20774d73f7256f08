//! The C API's view of the AV: core's [`AvOps`] for [`KitAv`], for [`SharedAv`] (the
//! `KitAv` a provider's AV object and its endpoints share) and for [`GatedAv`] (a
//! `SharedAv` whose calls pass the provider's [`AvGate`] first).

use super::insert::fill;
use super::*;
use ofi_core::av::check_fi_addr_slots;

/// A [`KitAv`] shared by the provider's AV object and the endpoints bound to it: use
/// it as a provider's `DomainOps::Av` type (every call goes to the kit's `AvOps`), and
/// let endpoints keep [`SharedAv::kit`] clones.
#[derive(Debug)]
pub struct SharedAv<P = ()>(Arc<KitAv<P>>);

impl<P> SharedAv<P> {
    /// Share `av`.
    pub fn new(av: KitAv<P>) -> SharedAv<P> {
        SharedAv(Arc::new(av))
    }

    /// The shared AV (what endpoints keep).
    pub fn kit(&self) -> &Arc<KitAv<P>> {
        &self.0
    }
}

/// Writes, inside `impl AvOps<F> for SharedAv<P>`, one method per entry of core's list
/// of AV operations (`for_each_av_op!`) that has a provider method: it calls the same
/// method of the shared [`KitAv`] with the same arguments.
macro_rules! forward_to_kit_av {
    ($(#[$tdoc:meta])* $class:ident $Table:ident $Trait:ident $ObjOf:ident $Host:ident { $($list:tt)* }) => {
        ofi_core::__ctl_each! { [forward_to_kit_av_method] {} $($list)* }
    };
}

/// One method of [`forward_to_kit_av!`].
macro_rules! forward_to_kit_av_method {
    ($ctx:tt fn $name:ident $adapter:tt $doc:tt [] ($($p:ident : $pt:ty),*) -> [$pr:ty] $def:tt $fwd:tt) => {
        #[allow(clippy::too_many_arguments)]
        fn $name(&self, $($p: $pt),*) -> $pr {
            AvOps::<F>::$name(&*self.0, $($p),*)
        }
    };
    // A C entry without a provider method (`bind`: `bind_eq` below).
    ($ctx:tt fn $($rest:tt)*) => {};
    ($ctx:tt $(#[$doc:meta])* close) => {
        fn close(&self) -> Result<()> {
            AvOps::<F>::close(&*self.0)
        }
    };
    ($ctx:tt $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),*) ($($b:ident $blen:ident [$bt:ty] $bc:tt),*) ($($c:ident : $ct:ty),*) $err:tt [$($shape:ident $rt:ty)?] $V:tt $def:tt) => {
        fn $name(&self, $($a: $t,)* $($b: &[$bt],)* $($c: $ct),*) -> ofi_core::__ctl_prov_ret!($($shape $rt)?) {
            AvOps::<F>::$name(&*self.0, $($a,)* $($b,)* $($c),*)
        }
    };
}

impl<F, P> AvOps<F> for SharedAv<P>
where
    F: FabricOps,
    EqOf<F>: AvEventTarget,
    P: Send + Sync + 'static,
{
    ofi_core::for_each_av_op!(forward_to_kit_av);

    fn bind_eq(&self, eq: &EqOf<F>, flags: u64) -> Result<()> {
        AvOps::<F>::bind_eq(&*self.0, eq, flags)
    }
}

/// What a provider adds to the calls of its [`SharedAv`], for [`GatedAv`]: nothing by
/// default, so a provider writes only what differs (shm's named AVs refuse the changes
/// their views could not replay, record each insert in a shared table, and bring a view
/// up to date before it is read).
pub trait AvGate<P = ()>: Send + Sync + 'static {
    /// Before `fi_av_insertsvc`, `fi_av_insertsym` and `fi_av_remove` (`call` names it).
    ///
    /// # Errors
    /// The provider's reason to refuse the call; the AV is left as it was.
    fn before_change(&self, _call: &str) -> Result<()> {
        Ok(())
    }

    /// Before `fi_av_lookup` and `fi_av_straddr` of `av` (`fi_av_straddr` formats the
    /// address even when this fails: it cannot report an error).
    ///
    /// # Errors
    /// The provider's reason to refuse the lookup.
    fn before_read(&self, _av: &SharedAv<P>) -> Result<()> {
        Ok(())
    }

    /// `fi_av_insert` of `addrs`: `insert` inserts them into the AV, writing their
    /// fabric addresses to the slice it is given (`fi_addr` here) and returning how
    /// many it inserted, as `fi_av_insert` does. By default it is just called.
    ///
    /// # Errors
    /// The provider's reason to refuse the insert, or `insert`'s error.
    fn insert(
        &self,
        _addrs: &[Address],
        fi_addr: &mut [u64],
        insert: impl FnOnce(&mut [u64]) -> Result<usize>,
    ) -> Result<usize> {
        insert(fi_addr)
    }
}

/// A [`SharedAv`] whose calls pass the provider's [`AvGate`] `G` first: a provider
/// whose AV only adds checks to some calls names `GatedAv<G>` as its `DomainOps::Av`
/// and writes the gate, not the whole of core's [`AvOps`].
#[derive(Debug)]
pub struct GatedAv<G, P = ()> {
    av: SharedAv<P>,
    gate: G,
}

impl<G, P> GatedAv<G, P> {
    /// `av`, behind `gate`.
    pub fn new(av: SharedAv<P>, gate: G) -> GatedAv<G, P> {
        GatedAv { av, gate }
    }

    /// The shared AV (what endpoints keep), reached without the gate.
    pub fn shared(&self) -> &SharedAv<P> {
        &self.av
    }

    /// The provider's gate.
    pub fn gate(&self) -> &G {
        &self.gate
    }
}

impl<F, G, P> AvOps<F> for GatedAv<G, P>
where
    F: FabricOps,
    EqOf<F>: AvEventTarget,
    G: AvGate<P>,
    P: Send + Sync + 'static,
{
    fn insert(
        &self,
        addrs: &[Address],
        fi_addr: &mut [u64],
        flags: u64,
        context: usize,
    ) -> Result<usize> {
        self.gate.insert(addrs, fi_addr, |fi_addr| {
            AvOps::<F>::insert(&self.av, addrs, fi_addr, flags, context)
        })
    }

    fn insertsvc(
        &self,
        node: &str,
        service: &str,
        fi_addr: &mut u64,
        flags: u64,
        context: usize,
    ) -> Result<usize> {
        self.gate.before_change("fi_av_insertsvc")?;
        AvOps::<F>::insertsvc(&self.av, node, service, fi_addr, flags, context)
    }

    fn insertsym(
        &self,
        node: &str,
        nodecnt: usize,
        service: &str,
        svccnt: usize,
        fi_addr: &mut [u64],
        flags: u64,
        context: usize,
    ) -> Result<usize> {
        self.gate.before_change("fi_av_insertsym")?;
        AvOps::<F>::insertsym(
            &self.av, node, nodecnt, service, svccnt, fi_addr, flags, context,
        )
    }

    fn remove(&self, fi_addr: &[u64], flags: u64) -> Result<()> {
        self.gate.before_change("fi_av_remove")?;
        AvOps::<F>::remove(&self.av, fi_addr, flags)
    }

    fn lookup(&self, fi_addr: u64) -> Result<Address> {
        self.gate.before_read(&self.av)?;
        AvOps::<F>::lookup(&self.av, fi_addr)
    }

    fn straddr(&self, addr: &Address) -> String {
        // `fi_av_straddr` cannot fail: an AV its gate could not bring up to date still
        // formats addresses.
        let _ = self.gate.before_read(&self.av);
        AvOps::<F>::straddr(&self.av, addr)
    }

    fn bind_eq(&self, eq: &EqOf<F>, flags: u64) -> Result<()> {
        AvOps::<F>::bind_eq(&self.av, eq, flags)
    }
}

/// The C-shaped interface: failed entries become `FI_ADDR_NOTAVAIL`, the return value
/// is the number inserted (0 for an `FI_EVENT` AV). `FI_AV_USER_ID` takes the user ids
/// from `fi_addr` on input. `FI_SYNC_ERR` is accepted, but the per-entry codes cannot
/// reach the C caller's array through this trait (it carries `context` as a plain
/// integer); use the inherent methods for them.
impl<F, P> AvOps<F> for KitAv<P>
where
    F: FabricOps,
    EqOf<F>: AvEventTarget,
    P: Send + Sync + 'static,
{
    fn insert(
        &self,
        addrs: &[Address],
        fi_addr: &mut [u64],
        flags: u64,
        context: usize,
    ) -> Result<usize> {
        check_fi_addr_slots("av insert", fi_addr, addrs.len())?;
        let results = if flags & INSERT_USER_ID != 0 {
            let ids: Vec<u64> = fi_addr[..addrs.len()].to_vec();
            KitAv::insert_user_ids(self, addrs, &ids, flags, context)?
        } else {
            KitAv::insert(self, addrs, flags, context)?
        };
        Ok(self.ops_count(fill(&results, fi_addr)))
    }

    fn insertsvc(
        &self,
        node: &str,
        service: &str,
        fi_addr: &mut u64,
        flags: u64,
        context: usize,
    ) -> Result<usize> {
        let results = KitAv::insertsvc(self, node, service, flags, context)?;
        Ok(self.ops_count(fill(&results, std::slice::from_mut(fi_addr))))
    }

    fn insertsym(
        &self,
        node: &str,
        nodecnt: usize,
        service: &str,
        svccnt: usize,
        fi_addr: &mut [u64],
        flags: u64,
        context: usize,
    ) -> Result<usize> {
        check_fi_addr_slots("av insertsym", fi_addr, nodecnt.saturating_mul(svccnt))?;
        let results = KitAv::insertsym(self, node, nodecnt, service, svccnt, flags, context)?;
        Ok(self.ops_count(fill(&results, fi_addr)))
    }

    fn remove(&self, fi_addr: &[u64], flags: u64) -> Result<()> {
        KitAv::remove(self, fi_addr, flags)
    }

    fn lookup(&self, fi_addr: u64) -> Result<Address> {
        KitAv::lookup(self, fi_addr)
    }

    fn straddr(&self, addr: &Address) -> String {
        KitAv::straddr(self, addr)
    }

    fn bind_eq(&self, eq: &EqOf<F>, flags: u64) -> Result<()> {
        // Checked before the EQ is asked for its sink: bad flags win over a bad EQ.
        reserved_flags("av bind", flags)?;
        self.bind_sink(eq.av_event_sink()?, flags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Ops = Unsupported;

    #[test]
    fn shared_av_forwards_every_operation_to_the_kit_av() {
        let config = AvConfig::new(AddrFormat::SOCKADDR_IN);
        let attr = AvAttr {
            av_type: AvType::Table,
            ..AvAttr::default()
        };
        let shared = SharedAv::<()>::new(KitAv::open(&attr, 0, config).unwrap());
        let a: Address = Address::Inet("10.0.0.1:7000".parse().unwrap());
        let mut fi_addr = [0u64; 1];
        assert_eq!(
            AvOps::<Ops>::insert(&shared, std::slice::from_ref(&a), &mut fi_addr, 0, 0).unwrap(),
            1
        );
        assert_eq!(shared.kit().len(), 1, "the insert reached the shared AV");
        assert_eq!(AvOps::<Ops>::lookup(&shared, fi_addr[0]).unwrap(), a);
        assert_eq!(
            AvOps::<Ops>::straddr(&shared, &a),
            AvOps::<Ops>::straddr(&**shared.kit(), &a)
        );
        let mut one = 0;
        assert_eq!(
            AvOps::<Ops>::insertsvc(&shared, "10.0.0.2", "7001", &mut one, 0, 0).unwrap(),
            1
        );
        let mut sym = [0u64; 2];
        assert_eq!(
            AvOps::<Ops>::insertsym(&shared, "10.0.0.3", 2, "7002", 1, &mut sym, 0, 0).unwrap(),
            2
        );
        assert_eq!(shared.kit().len(), 4);
        AvOps::<Ops>::remove(&shared, &fi_addr, 0).unwrap();
        assert_eq!(shared.kit().len(), 3, "the remove reached the shared AV");
        assert_eq!(
            AvOps::<Ops>::lookup(&shared, fi_addr[0])
                .unwrap_err()
                .code(),
            Errno::EINVAL
        );
        AvOps::<Ops>::close(&shared).unwrap();
    }

    /// A gate that refuses every change but `fi_av_insert`, and every read while
    /// `stale`; it counts the reads it was asked about.
    #[derive(Default)]
    struct InsertOnly {
        stale: std::sync::atomic::AtomicBool,
        reads: std::sync::atomic::AtomicUsize,
    }

    impl AvGate for InsertOnly {
        fn before_change(&self, call: &str) -> Result<()> {
            Err(Error::new(Errno::EOPNOTSUPP, format!("{call} refused")))
        }

        fn before_read(&self, _av: &SharedAv) -> Result<()> {
            self.reads
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if self.stale.load(std::sync::atomic::Ordering::Relaxed) {
                return Err(Error::new(Errno::EIO, "stale"));
            }
            Ok(())
        }
    }

    #[test]
    fn a_gated_av_asks_its_gate_before_each_call() {
        let config = AvConfig::new(AddrFormat::SOCKADDR_IN);
        let kit = KitAv::open(&AvAttr::default(), 0, config).unwrap();
        let gated = GatedAv::new(SharedAv::new(kit), InsertOnly::default());
        let len = || gated.shared().kit().len();
        let a: Address = Address::Inet("10.0.0.1:7000".parse().unwrap());
        let mut fi_addr = [0u64; 1];
        let inserted = AvOps::<Ops>::insert(&gated, std::slice::from_ref(&a), &mut fi_addr, 0, 0);
        assert_eq!(inserted.unwrap(), 1, "the default insert hook inserts");
        assert_eq!(len(), 1);
        let refused = |r: Result<usize>, call: &str| {
            let e = r.unwrap_err();
            assert_eq!(e.code(), Errno::EOPNOTSUPP, "{call}");
            assert_eq!(e.message(), format!("{call} refused"));
        };
        let mut one = 0;
        refused(
            AvOps::<Ops>::insertsvc(&gated, "10.0.0.2", "7001", &mut one, 0, 0),
            "fi_av_insertsvc",
        );
        let mut sym = [0u64; 2];
        refused(
            AvOps::<Ops>::insertsym(&gated, "10.0.0.3", 2, "7002", 1, &mut sym, 0, 0),
            "fi_av_insertsym",
        );
        refused(
            AvOps::<Ops>::remove(&gated, &fi_addr, 0).map(|()| 0),
            "fi_av_remove",
        );
        assert_eq!(len(), 1, "a refused change leaves the AV as it was");
        assert_eq!(AvOps::<Ops>::lookup(&gated, fi_addr[0]).unwrap(), a);
        gated
            .gate()
            .stale
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let e = AvOps::<Ops>::lookup(&gated, fi_addr[0]).unwrap_err();
        assert_eq!(e.code(), Errno::EIO, "a refused read fails the lookup");
        assert_eq!(
            AvOps::<Ops>::straddr(&gated, &a),
            AvOps::<Ops>::straddr(&**gated.shared().kit(), &a),
            "straddr formats even when the gate refuses the read"
        );
        let reads = gated
            .gate()
            .reads
            .load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(reads, 3, "two lookups and one straddr");
    }
}
