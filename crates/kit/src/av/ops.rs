//! The C API's view of the AV: core's [`AvOps`] for [`KitAv`] and for [`SharedAv`], the
//! `KitAv` a provider's AV object and its endpoints share.

use super::insert::fill;
use super::*;

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

impl<F, P> AvOps<F> for SharedAv<P>
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
        AvOps::<F>::insert(&*self.0, addrs, fi_addr, flags, context)
    }

    fn insertsvc(
        &self,
        node: &str,
        service: &str,
        fi_addr: &mut u64,
        flags: u64,
        context: usize,
    ) -> Result<usize> {
        AvOps::<F>::insertsvc(&*self.0, node, service, fi_addr, flags, context)
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
        AvOps::<F>::insertsym(
            &*self.0, node, nodecnt, service, svccnt, fi_addr, flags, context,
        )
    }

    fn remove(&self, fi_addr: &[u64], flags: u64) -> Result<()> {
        AvOps::<F>::remove(&*self.0, fi_addr, flags)
    }

    fn lookup(&self, fi_addr: u64) -> Result<Address> {
        AvOps::<F>::lookup(&*self.0, fi_addr)
    }

    fn straddr(&self, addr: &Address) -> String {
        AvOps::<F>::straddr(&*self.0, addr)
    }

    fn bind_eq(&self, eq: &EqOf<F>, flags: u64) -> Result<()> {
        AvOps::<F>::bind_eq(&*self.0, eq, flags)
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
        if fi_addr.len() < addrs.len() {
            return einval("av insert: fewer fabric address slots than addresses");
        }
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
        let total = nodecnt.saturating_mul(svccnt);
        if fi_addr.len() < total {
            return einval("av insertsym: fewer fabric address slots than nodecnt × svccnt");
        }
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
