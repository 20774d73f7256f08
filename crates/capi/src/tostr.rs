//! `fi_tostr` and `fi_tostr_r`: the text of an attribute, flag set or enumeration value,
//! as the C library prints it (ofi-rs's `tostr` module does the printing; this reads the
//! C value and picks the printer).
//!
//! `fi_tostr` returns a per-thread buffer, valid until the thread's next `fi_tostr`;
//! `fi_tostr_r` writes into the caller's buffer, cut to fit with a terminating NUL. A
//! null `data` prints `(null)`; a type this library has no printer for prints nothing.

use std::cell::RefCell;
use std::ffi::{c_char, CString};

use ofi::tostr as t;
use ofi::{
    AddrFormat, AtomicOp, AvType, Caps, CqFormat, Datatype, EpType, EqEvent, HmemIface, Mode,
    MrMode, MsgOrder, OpFlags, Progress, Protocol, Threading, API_VERSION,
};

use crate::guard;
use crate::info::{self, FiDomainAttr, FiEpAttr, FiFabricAttr, FiInfo, FiRxAttr, FiTxAttr};

/// `enum fi_type` values.
mod ty {
    pub const INFO: u32 = 0;
    pub const EP_TYPE: u32 = 1;
    pub const CAPS: u32 = 2;
    pub const OP_FLAGS: u32 = 3;
    pub const ADDR_FORMAT: u32 = 4;
    pub const TX_ATTR: u32 = 5;
    pub const RX_ATTR: u32 = 6;
    pub const EP_ATTR: u32 = 7;
    pub const DOMAIN_ATTR: u32 = 8;
    pub const FABRIC_ATTR: u32 = 9;
    pub const THREADING: u32 = 10;
    pub const PROGRESS: u32 = 11;
    pub const PROTOCOL: u32 = 12;
    pub const MSG_ORDER: u32 = 13;
    pub const MODE: u32 = 14;
    pub const AV_TYPE: u32 = 15;
    pub const ATOMIC_TYPE: u32 = 16;
    pub const ATOMIC_OP: u32 = 17;
    pub const VERSION: u32 = 18;
    pub const EQ_EVENT: u32 = 19;
    pub const MR_MODE: u32 = 21;
    pub const HMEM_IFACE: u32 = 25;
    pub const CQ_FORMAT: u32 = 26;
    pub const LOG_LEVEL: u32 = 27;
    pub const LOG_SUBSYS: u32 = 28;
}

/// The C names of `enum fi_log_level`.
const LOG_LEVELS: &[&str] = &["FI_LOG_WARN", "FI_LOG_TRACE", "FI_LOG_INFO", "FI_LOG_DEBUG"];
/// The C names of `enum fi_log_subsys`.
const LOG_SUBSYS: &[&str] = &[
    "FI_LOG_CORE",
    "FI_LOG_FABRIC",
    "FI_LOG_DOMAIN",
    "FI_LOG_EP_CTRL",
    "FI_LOG_EP_DATA",
    "FI_LOG_AV",
    "FI_LOG_CQ",
    "FI_LOG_EQ",
    "FI_LOG_MR",
    "FI_LOG_CNTR",
];

fn name_or_unknown(name: Option<&'static str>) -> String {
    name.unwrap_or("Unknown").to_owned()
}

/// The text of the value at `data` of C type `datatype`.
///
/// # Safety
/// `data` is null or points to a valid value of the C type `datatype` names.
pub unsafe fn render(data: *const u8, datatype: u32) -> String {
    if data.is_null() {
        return "(null)".to_owned();
    }
    // SAFETY: `data` points to a value of the type `datatype` names (contract).
    let u32_at = || unsafe { data.cast::<u32>().read_unaligned() };
    // SAFETY: as above.
    let u64_at = || unsafe { data.cast::<u64>().read_unaligned() };
    // SAFETY: as above, for the structures (`fi_info` and the attributes).
    unsafe {
        match datatype {
            ty::INFO => match info::info_from_c(data.cast::<FiInfo>()) {
                Ok(i) => t::info_to_string(&i),
                Err(e) => format!("fi_info: {e}\n"),
            },
            ty::TX_ATTR => t::tx_attr_to_string(&info::tx_from_c(&*data.cast::<FiTxAttr>())),
            ty::RX_ATTR => t::rx_attr_to_string(&info::rx_from_c(&*data.cast::<FiRxAttr>())),
            ty::EP_ATTR => match info::ep_from_c(&*data.cast::<FiEpAttr>()) {
                Ok(a) => t::ep_attr_to_string(&a),
                Err(e) => format!("fi_ep_attr: {e}\n"),
            },
            ty::DOMAIN_ATTR => match info::domain_from_c(&*data.cast::<FiDomainAttr>()) {
                Ok(a) => t::domain_attr_to_string(&a),
                Err(e) => format!("fi_domain_attr: {e}\n"),
            },
            ty::FABRIC_ATTR => {
                t::fabric_attr_to_string(&info::fabric_from_c(&*data.cast::<FiFabricAttr>()))
            }
            _ => render_value(datatype, u32_at, u64_at),
        }
    }
}

/// The text of a flag set or enumeration value (read with `u32_at` / `u64_at`).
fn render_value(datatype: u32, u32_at: impl Fn() -> u32, u64_at: impl Fn() -> u64) -> String {
    match datatype {
        ty::EP_TYPE => name_or_unknown(EpType::from_raw(u32_at()).map(|e| e.name())),
        ty::CAPS => t::caps_names(Caps::from_bits_retain(u64_at())).join(", "),
        ty::OP_FLAGS => t::op_flags_names(OpFlags::from_bits_retain(u64_at())).join(", "),
        ty::ADDR_FORMAT => t::addr_format_str(AddrFormat(u32_at())).to_owned(),
        ty::THREADING => name_or_unknown(Threading::from_raw(u32_at()).map(|e| e.name())),
        ty::PROGRESS => name_or_unknown(Progress::from_raw(u32_at()).map(|e| e.name())),
        ty::PROTOCOL => t::protocol_str(Protocol(u32_at())).to_owned(),
        ty::MSG_ORDER => MsgOrder::from_bits_retain(u64_at()).names().join(", "),
        ty::MODE => Mode::from_bits_retain(u64_at()).names().join(", "),
        ty::AV_TYPE => name_or_unknown(AvType::from_raw(u32_at()).map(|e| e.name())),
        ty::ATOMIC_TYPE => name_or_unknown(Datatype::from_raw(u32_at()).map(|e| e.name())),
        ty::ATOMIC_OP => name_or_unknown(AtomicOp::from_raw(u32_at()).map(|e| e.name())),
        ty::VERSION => format!("{}.0", API_VERSION),
        ty::EQ_EVENT => name_or_unknown(EqEvent::from_raw(u32_at()).map(|e| e.name())),
        ty::MR_MODE => MrMode::from_bits_retain(u32_at()).names().join(", "),
        ty::HMEM_IFACE => name_or_unknown(HmemIface::from_raw(u32_at()).map(|e| e.name())),
        ty::CQ_FORMAT => name_or_unknown(CqFormat::from_raw(u32_at()).map(|e| e.name())),
        ty::LOG_LEVEL => name_or_unknown(LOG_LEVELS.get(u32_at() as usize).copied()),
        ty::LOG_SUBSYS => name_or_unknown(LOG_SUBSYS.get(u32_at() as usize).copied()),
        _ => String::new(),
    }
}

/// `fi_tostr_r@FABRIC_1.4`: writes the text into `buf` (at most `len` bytes with the
/// NUL) and returns `buf`; null when `buf` is null or `len` is 0.
///
/// # Safety
/// `buf` is null or writable for `len` bytes; `data` as for [`render`].
#[no_mangle]
pub unsafe extern "C" fn fi_tostr_r(
    buf: *mut c_char,
    len: usize,
    data: *const u8,
    datatype: u32,
) -> *mut c_char {
    guard(|| {
        if buf.is_null() || len == 0 {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's contract.
        let text = unsafe { render(data, datatype) };
        let n = text.len().min(len - 1);
        // SAFETY: `buf` is writable for `len > n` bytes (contract).
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
            buf.add(n).write(0);
        }
        buf
    })
}

/// `fi_tostr@FABRIC_1.0`: the text in a per-thread buffer (valid until this thread's
/// next call).
///
/// # Safety
/// `data` as for [`render`].
#[no_mangle]
pub unsafe extern "C" fn fi_tostr(data: *const u8, datatype: u32) -> *mut c_char {
    thread_local! {
        static BUF: RefCell<CString> = RefCell::new(CString::default());
    }
    guard(|| {
        // SAFETY: the caller's contract.
        let text = unsafe { render(data, datatype) };
        let text = text.split('\0').next().unwrap_or("").to_owned();
        BUF.with(|b| {
            let mut b = b.borrow_mut();
            *b = CString::new(text).unwrap_or_default();
            b.as_ptr().cast_mut()
        })
    })
}
