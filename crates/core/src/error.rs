//! Fabric error codes and the error type every call returns.
//!
//! Codes are the C library's `FI_*` values (`rdma/fi_errno.h` on Linux): errno values
//! below 256, libfabric-specific codes from 256 (`FI_ERRNO_OFFSET`). [`strerror`]
//! reproduces the C library's strings exactly, so tools and logs read the same.
//!
//! Invariant: an [`Errno`] is always the positive code; calls that cross the C ABI
//! carry it negated (`-FI_EAGAIN`), as the C API does. Nothing here panics.

use std::borrow::Cow;
use std::fmt;

/// A fabric error code (positive), e.g. [`Errno::EAGAIN`] = 11.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Errno(pub i32);

macro_rules! errnos {
    ($( $(#[$m:meta])* $name:ident = $val:expr, $cname:literal; )*) => {
        impl Errno {
            $( $(#[$m])* pub const $name: Errno = Errno($val); )*
            /// Every named code, in numeric order of declaration.
            pub const ALL: &'static [Errno] = &[$(Errno::$name),*];
            /// The C macro name of this code (`"FI_EAGAIN"`), if it has one.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $( v if v == $val => Some($cname), )*
                    _ => None,
                }
            }
        }
    };
}

errnos! {
    /// Success.
    SUCCESS = 0, "FI_SUCCESS";
    /// Operation not permitted.
    EPERM = 1, "FI_EPERM";
    /// No such file or directory.
    ENOENT = 2, "FI_ENOENT";
    /// Interrupted system call.
    EINTR = 4, "FI_EINTR";
    /// Input/output error.
    EIO = 5, "FI_EIO";
    /// Argument list too long.
    E2BIG = 7, "FI_E2BIG";
    /// Bad file descriptor.
    EBADF = 9, "FI_EBADF";
    /// Resource temporarily unavailable: progress can clear this.
    EAGAIN = 11, "FI_EAGAIN";
    /// Cannot allocate memory.
    ENOMEM = 12, "FI_ENOMEM";
    /// Permission denied.
    EACCES = 13, "FI_EACCES";
    /// Bad address.
    EFAULT = 14, "FI_EFAULT";
    /// Device or resource busy.
    EBUSY = 16, "FI_EBUSY";
    /// No such device.
    ENODEV = 19, "FI_ENODEV";
    /// Invalid argument.
    EINVAL = 22, "FI_EINVAL";
    /// Too many open files.
    EMFILE = 24, "FI_EMFILE";
    /// No space left on device.
    ENOSPC = 28, "FI_ENOSPC";
    /// Function not implemented.
    ENOSYS = 38, "FI_ENOSYS";
    /// No message of desired type.
    ENOMSG = 42, "FI_ENOMSG";
    /// No data available.
    ENODATA = 61, "FI_ENODATA";
    /// Protocol error.
    EPROTO = 71, "FI_EPROTO";
    /// Value too large for defined data type.
    EOVERFLOW = 75, "FI_EOVERFLOW";
    /// Message too long.
    EMSGSIZE = 90, "FI_EMSGSIZE";
    /// Protocol not available.
    ENOPROTOOPT = 92, "FI_ENOPROTOOPT";
    /// Operation not supported.
    EOPNOTSUPP = 95, "FI_EOPNOTSUPP";
    /// Address already in use.
    EADDRINUSE = 98, "FI_EADDRINUSE";
    /// Cannot assign requested address.
    EADDRNOTAVAIL = 99, "FI_EADDRNOTAVAIL";
    /// Network is down.
    ENETDOWN = 100, "FI_ENETDOWN";
    /// Network is unreachable.
    ENETUNREACH = 101, "FI_ENETUNREACH";
    /// Software caused connection abort.
    ECONNABORTED = 103, "FI_ECONNABORTED";
    /// Connection reset by peer.
    ECONNRESET = 104, "FI_ECONNRESET";
    /// No buffer space available.
    ENOBUFS = 105, "FI_ENOBUFS";
    /// Transport endpoint is already connected.
    EISCONN = 106, "FI_EISCONN";
    /// Transport endpoint is not connected.
    ENOTCONN = 107, "FI_ENOTCONN";
    /// Cannot send after transport endpoint shutdown.
    ESHUTDOWN = 108, "FI_ESHUTDOWN";
    /// Connection timed out.
    ETIMEDOUT = 110, "FI_ETIMEDOUT";
    /// Connection refused.
    ECONNREFUSED = 111, "FI_ECONNREFUSED";
    /// Host is down.
    EHOSTDOWN = 112, "FI_EHOSTDOWN";
    /// No route to host.
    EHOSTUNREACH = 113, "FI_EHOSTUNREACH";
    /// Operation already in progress.
    EALREADY = 114, "FI_EALREADY";
    /// Operation now in progress.
    EINPROGRESS = 115, "FI_EINPROGRESS";
    /// Remote I/O error.
    EREMOTEIO = 121, "FI_EREMOTEIO";
    /// Operation canceled.
    ECANCELED = 125, "FI_ECANCELED";
    /// Key was rejected by service.
    EKEYREJECTED = 129, "FI_EKEYREJECTED";
    /// Unspecified error (also: a panic caught at the plugin boundary).
    EOTHER = 256, "FI_EOTHER";
    /// Provided buffer is too small.
    ETOOSMALL = 257, "FI_ETOOSMALL";
    /// Operation not permitted in current state.
    EOPBADSTATE = 258, "FI_EOPBADSTATE";
    /// Error available (read it with `readerr`).
    EAVAIL = 259, "FI_EAVAIL";
    /// Flags not supported.
    EBADFLAGS = 260, "FI_EBADFLAGS";
    /// Missing or unavailable event queue.
    ENOEQ = 261, "FI_ENOEQ";
    /// Invalid resource domain.
    EDOMAIN = 262, "FI_EDOMAIN";
    /// Missing or unavailable completion queue.
    ENOCQ = 263, "FI_ENOCQ";
    /// CRC error.
    ECRC = 264, "FI_ECRC";
    /// Truncation error.
    ETRUNC = 265, "FI_ETRUNC";
    /// Required key not available.
    ENOKEY = 266, "FI_ENOKEY";
    /// Missing or unavailable address vector.
    ENOAV = 267, "FI_ENOAV";
    /// Queue has been overrun.
    EOVERRUN = 268, "FI_EOVERRUN";
    /// Receiver not ready, no receive buffers available.
    ENORX = 269, "FI_ENORX";
}

impl Errno {
    /// `FI_EWOULDBLOCK`, an alias of [`Errno::EAGAIN`].
    pub const EWOULDBLOCK: Errno = Errno::EAGAIN;
    /// First libfabric-specific code (`FI_ERRNO_OFFSET`).
    pub const ERRNO_OFFSET: i32 = 256;
    /// One past the last libfabric-specific code (`FI_ERRNO_MAX` of 1.17).
    pub const ERRNO_MAX: i32 = 270;

    /// The code as the C ABI returns it: negative, or 0 for success.
    pub const fn to_status(self) -> i32 {
        -self.0
    }

    /// The C library's message for this code, as `fi_strerror` prints it.
    pub fn message(self) -> Cow<'static, str> {
        strerror(self.0)
    }

    /// Decode an operation's status that a peer sent (in a packet, or in shared
    /// memory): 0 is success (`None`); a named `FI_*` code, positive or negated, is that
    /// code; any other value is the peer breaking its protocol, [`Errno::EPROTO`]. So a
    /// peer can neither hand the application a code that is none, nor make this
    /// overflow (`i64::MIN`, `i32::MIN`).
    pub fn from_peer_status(status: i64) -> Option<Errno> {
        if status == 0 {
            return None;
        }
        let code = status
            .checked_abs()
            .and_then(|a| i32::try_from(a).ok())
            .map(Errno);
        Some(match code {
            Some(e) if e.name().is_some() => e,
            _ => Errno::EPROTO,
        })
    }
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}({})", self.0),
            None => write!(f, "Errno({})", self.0),
        }
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

/// The C library's `fi_strerror`: libc's text below 256, the fabric table from 256 to
/// 269, `"Unspecified error"` above. The sign is ignored.
pub fn strerror(code: i32) -> Cow<'static, str> {
    let code = code.unsigned_abs();
    if code < Errno::ERRNO_OFFSET as u32 {
        return libc_strerror(code as i32);
    }
    Cow::Borrowed(match code {
        256 => "Unspecified error",
        257 => "Provided buffer is too small",
        258 => "Operation not permitted in current state",
        259 => "Error available",
        260 => "Flags not supported",
        261 => "Missing or unavailable event queue",
        262 => "Invalid resource domain",
        263 => "Missing or unavailable completion queue",
        264 => "CRC error",
        265 => "Truncation error",
        266 => "Required key not available",
        267 => "Missing or unavailable address vector",
        268 => "Queue has been overrun",
        269 => "Receiver not ready, no receive buffers available",
        _ => "Unspecified error",
    })
}

fn libc_strerror(code: i32) -> Cow<'static, str> {
    let mut buf = [0 as libc::c_char; 256];
    // SAFETY: `buf` is a valid writable buffer of the length passed; the XSI/GNU
    // `strerror_r` exported by the `libc` crate on Linux is the XSI variant, which
    // writes a NUL-terminated string into `buf` and returns 0 on success.
    let rc = unsafe { libc::strerror_r(code, buf.as_mut_ptr(), buf.len()) };
    if rc != 0 {
        return Cow::Owned(format!("Unknown error {code}"));
    }
    // SAFETY: on success `strerror_r` left a NUL-terminated string inside `buf`.
    let s = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
    Cow::Owned(s.to_string_lossy().into_owned())
}

/// An error: a fabric code plus a message that says what went wrong and with what.
///
/// `Display` prints the message followed by the C library's text for the code, e.g.
/// `hints.ep_attr.type: FI_EP_MSG not offered (No data available)`.
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    code: Errno,
    msg: Cow<'static, str>,
}

impl Error {
    /// An error with `code` and a message.
    pub fn new(code: Errno, msg: impl Into<Cow<'static, str>>) -> Self {
        Error {
            code,
            msg: msg.into(),
        }
    }

    /// An error carrying only a code; its message is the C library's text.
    pub const fn code_only(code: Errno) -> Self {
        Error {
            code,
            msg: Cow::Borrowed(""),
        }
    }

    /// Build from a C-ABI status (`-FI_xxx`); a non-negative status maps to `FI_EOTHER`.
    pub fn from_status(status: isize) -> Self {
        if status < 0 && status >= i32::MIN as isize {
            Error::code_only(Errno((-status) as i32))
        } else {
            Error::new(Errno::EOTHER, format!("unexpected status {status}"))
        }
    }

    /// The fabric code.
    pub fn code(&self) -> Errno {
        self.code
    }

    /// The message (without the code's text); empty for [`Error::code_only`].
    pub fn message(&self) -> &str {
        &self.msg
    }

    /// The negative status the C ABI returns for this error.
    pub fn to_status(&self) -> isize {
        -(self.code.0 as isize)
    }

    /// Prefix the message with some context: `"{ctx}: {msg}"`.
    pub fn context(mut self, ctx: impl fmt::Display) -> Self {
        self.msg = if self.msg.is_empty() {
            Cow::Owned(ctx.to_string())
        } else {
            Cow::Owned(format!("{ctx}: {}", self.msg))
        };
        self
    }
}

impl From<Errno> for Error {
    fn from(code: Errno) -> Self {
        Error::code_only(code)
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        let code = e.raw_os_error().map(Errno).unwrap_or(match e.kind() {
            std::io::ErrorKind::WouldBlock => Errno::EAGAIN,
            std::io::ErrorKind::InvalidInput => Errno::EINVAL,
            std::io::ErrorKind::NotFound => Errno::ENOENT,
            std::io::ErrorKind::PermissionDenied => Errno::EACCES,
            std::io::ErrorKind::TimedOut => Errno::ETIMEDOUT,
            _ => Errno::EIO,
        });
        Error::new(code, e.to_string())
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Error({:?}, {:?})", self.code, self.msg)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.msg.is_empty() {
            write!(f, "{}", self.code.message())
        } else {
            write!(f, "{} ({})", self.msg, self.code.message())
        }
    }
}

impl std::error::Error for Error {}

/// The result type of every fallible call.
pub type Result<T> = std::result::Result<T, Error>;

/// Shorthand for `Err(Error::new(code, msg))`.
pub fn fail<T>(code: Errno, msg: impl Into<Cow<'static, str>>) -> Result<T> {
    Err(Error::new(code, msg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fabric_strings_match_the_c_library() {
        assert_eq!(strerror(256), "Unspecified error");
        assert_eq!(strerror(-265), "Truncation error");
        assert_eq!(
            strerror(269),
            "Receiver not ready, no receive buffers available"
        );
        // 1.17 ends at FI_ENORX: 270 and beyond are unspecified.
        assert_eq!(strerror(270), "Unspecified error");
        assert_eq!(strerror(61), "No data available");
        assert_eq!(strerror(11), "Resource temporarily unavailable");
        assert_eq!(strerror(0), "Success");
    }

    #[test]
    fn peer_statuses_are_fi_codes_or_eproto() {
        assert_eq!(Errno::from_peer_status(0), None);
        assert_eq!(Errno::from_peer_status(5), Some(Errno::EIO));
        assert_eq!(Errno::from_peer_status(-104), Some(Errno::ECONNRESET));
        assert_eq!(Errno::from_peer_status(265), Some(Errno::ETRUNC));
        assert_eq!(Errno::from_peer_status(-269), Some(Errno::ENORX));
        for bad in [
            3,
            270,
            999,
            65_535,
            i32::MAX as i64,
            i32::MIN as i64,
            i64::MAX,
            i64::MIN,
            -(1 << 40),
        ] {
            assert_eq!(Errno::from_peer_status(bad), Some(Errno::EPROTO), "{bad}");
        }
    }

    #[test]
    fn names_and_values() {
        assert_eq!(Errno::ENODATA.0, 61);
        assert_eq!(Errno::EBADFLAGS.0, 260);
        assert_eq!(Errno::EAGAIN.name(), Some("FI_EAGAIN"));
        assert_eq!(Errno(12345).name(), None);
        assert_eq!(Errno::EAGAIN.to_status(), -11);
        assert_eq!(Error::from_status(-22).code(), Errno::EINVAL);
        assert_eq!(Error::from_status(5).code(), Errno::EOTHER);
    }

    #[test]
    fn display_includes_message_and_code_text() {
        let e = Error::new(Errno::ENODATA, "no provider offers FI_EP_MSG");
        assert_eq!(
            e.to_string(),
            "no provider offers FI_EP_MSG (No data available)"
        );
        assert_eq!(
            Error::code_only(Errno::EINVAL).to_string(),
            "Invalid argument"
        );
        let e = Error::code_only(Errno::EINVAL).context("hints");
        assert_eq!(e.message(), "hints");
    }
}
