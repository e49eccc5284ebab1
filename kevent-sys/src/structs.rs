//! Accessors and `Debug` for the bindgen structures, whose anonymous unions are awkward to
//! reach (`ev.__bindgen_anon_1.raw_u64`).

use core::fmt;

use crate::{kevent_id, kevent_ring, names, ukevent};

impl kevent_id {
    /// An id from its 64-bit value (`raw_u64`).
    pub const fn from_u64(v: u64) -> kevent_id {
        let mut id = kevent_id {
            __bindgen_anon_1: crate::kevent_id__bindgen_ty_1 { raw_u64: 0 },
        };
        id.__bindgen_anon_1.raw_u64 = v;
        id
    }

    /// An id from its two 32-bit words (`raw[0]`, `raw[1]`).
    pub const fn from_raw(raw: [u32; 2]) -> kevent_id {
        kevent_id {
            __bindgen_anon_1: crate::kevent_id__bindgen_ty_1 { raw },
        }
    }

    /// `raw_u64`.
    pub const fn as_u64(&self) -> u64 {
        // SAFETY: both union members are plain integers covering the same 8 bytes, so every
        // bit pattern is a valid `u64`.
        unsafe { self.__bindgen_anon_1.raw_u64 }
    }

    /// `raw[0]` and `raw[1]`.
    pub const fn raw(&self) -> [u32; 2] {
        // SAFETY: as in `as_u64`: every bit pattern is a valid `[u32; 2]`.
        unsafe { self.__bindgen_anon_1.raw }
    }

    /// The id of a SIGNAL kevent (spec section 5): `raw[0]` = `signo` (its bits as `u32`),
    /// with [`KEVENT_SIGNAL_NOMASK`](crate::KEVENT_SIGNAL_NOMASK) (bit 63 of `raw_u64`, bit 31
    /// of `raw[1]`) when `nomask`: report the signal only.
    pub const fn signal(signo: i32, nomask: bool) -> kevent_id {
        let mut id = signo as u32 as u64;
        if nomask {
            id |= crate::KEVENT_SIGNAL_NOMASK;
        }
        kevent_id::from_u64(id)
    }

    /// A SIGNAL kevent id split into `(signo, nomask)`, the inverse of [`kevent_id::signal`].
    ///
    /// `signo` is `raw[0]` reinterpreted as `i32` (a huge `raw[0]` becomes negative, which
    /// every backend rejects); other bits of `raw[1]` are not looked at here: an id with any
    /// of them set is refused at ADD ([`kevent_id::fits`], **P27**).
    pub const fn signal_parts(&self) -> (i32, bool) {
        let v = self.as_u64();
        (v as u32 as i32, v & crate::KEVENT_SIGNAL_NOMASK != 0)
    }

    /// The same signal's id with the other NOMASK variant: a queue watches a signal once,
    /// with or without NOMASK (**P27**), so this names the kevent an ADD of `self` conflicts
    /// with.
    pub const fn signal_other_variant(&self) -> kevent_id {
        kevent_id::from_u64(self.as_u64() ^ crate::KEVENT_SIGNAL_NOMASK)
    }

    /// Whether every bit of this id means something for a kevent of `type_`; ADD of an id
    /// that does not fit is `-EINVAL`. The id layouts are spec section 5's; the rules that
    /// refuse the unused bits are the project's:
    ///
    /// * SIGNAL (**P27**): `raw[0]` and the NOMASK bit only, bits 32-62 clear;
    /// * SOCKET, PIPE, POLL (**P28**) and INODE (**P29**): `raw[0]` is the fd, `raw[1]` is 0.
    ///
    /// Every other type uses the whole id (TIMER: seconds and nanoseconds, UNOTIFY: any).
    pub const fn fits(&self, type_: u32) -> bool {
        match type_ {
            crate::KEVENT_SIGNAL => (self.as_u64() & !crate::KEVENT_SIGNAL_NOMASK) >> 32 == 0,
            crate::KEVENT_SOCKET
            | crate::KEVENT_PIPE
            | crate::KEVENT_POLL
            | crate::KEVENT_INODE => self.raw()[1] == 0,
            _ => true,
        }
    }
}

// SAFETY: `ukevent` is plain data; its only pointer is the caller's opaque cookie (`ptr`),
// which no crate of this project dereferences: it is stored and handed back untouched, so
// moving or sharing a ukevent between threads cannot create a data race through it.
unsafe impl Send for ukevent {}
// SAFETY: as for `Send`: shared references only read integers and the untouched cookie.
unsafe impl Sync for ukevent {}

impl ukevent {
    /// A zeroed ukevent of `type_` watching `id` for `event`, with `req_flags`.
    pub const fn new(type_: u32, id: kevent_id, event: u32, req_flags: u32) -> ukevent {
        ukevent {
            id,
            type_,
            event,
            req_flags,
            ret_flags: 0,
            ret_data: [0; 2],
            __bindgen_anon_1: crate::ukevent__bindgen_ty_1 { user: [0; 2] },
        }
    }

    /// The caller cookie as one 64-bit value (`user[0]` is the low word on little-endian).
    pub const fn cookie(&self) -> u64 {
        // SAFETY: the union's members (`user: [u32; 2]`, `ptr`) cover the same 8 bytes on
        // 64-bit targets; reading them as `[u32; 2]` is valid for every bit pattern.
        let user = unsafe { self.__bindgen_anon_1.user };
        (user[0] as u64) | ((user[1] as u64) << 32)
    }

    /// Sets the caller cookie from one 64-bit value.
    pub const fn set_cookie(&mut self, cookie: u64) {
        self.__bindgen_anon_1.user = [cookie as u32, (cookie >> 32) as u32];
    }

    /// `user[0]` and `user[1]`.
    pub const fn user(&self) -> [u32; 2] {
        // SAFETY: see `cookie`.
        unsafe { self.__bindgen_anon_1.user }
    }
}

struct Flags(u32, names::Table);

impl fmt::Debug for Flags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        names::write_flags(f, self.0, self.1, "|", "0")
    }
}

struct TypeName(u32);

impl fmt::Debug for TypeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match names::type_name(self.0) {
            Some(n) => f.write_str(n),
            None => write!(f, "{}", self.0),
        }
    }
}

impl fmt::Debug for kevent_id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b] = self.raw();
        f.debug_struct("kevent_id").field("raw", &[a, b]).finish()
    }
}

impl fmt::Debug for ukevent {
    /// Decodes the type and the request and return flags by name (`ONESHOT|ET`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ukevent")
            .field("id", &self.id.raw())
            .field("type", &TypeName(self.type_))
            .field("event", &format_args!("{:#x}", self.event))
            .field("req_flags", &Flags(self.req_flags, names::REQ_FLAGS))
            .field("ret_flags", &Flags(self.ret_flags, names::RET_FLAGS))
            .field("ret_data", &self.ret_data)
            .field("cookie", &format_args!("{:#x}", self.cookie()))
            .finish()
    }
}

impl fmt::Debug for kevent_ring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("kevent_ring")
            .field("ring_kidx", &self.ring_kidx)
            .field("ring_over", &self.ring_over)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_decodes_flags_by_name() {
        let mut ev = ukevent::new(
            crate::KEVENT_SOCKET,
            kevent_id::from_raw([5, 0]),
            crate::KEVENT_SOCKET_RECV,
            crate::KEVENT_REQ_ONESHOT | crate::KEVENT_REQ_ET | 0x400,
        );
        ev.ret_flags = crate::KEVENT_RET_DONE;
        ev.set_cookie(0x1234_5678_9abc_def0);
        let s = format!("{ev:?}");
        assert!(s.contains("type: SOCKET"), "{s}");
        assert!(s.contains("ONESHOT|ET|0x400"), "{s}");
        assert!(s.contains("ret_flags: DONE"), "{s}");
        assert_eq!(ev.cookie(), 0x1234_5678_9abc_def0);
        assert_eq!(ev.user(), [0x9abc_def0, 0x1234_5678]);
    }

    #[test]
    fn signal_id_encoding_round_trips() {
        assert_eq!(kevent_id::signal(10, false).as_u64(), 10);
        assert_eq!(
            kevent_id::signal(10, true).as_u64(),
            10 | crate::KEVENT_SIGNAL_NOMASK
        );
        assert_eq!(kevent_id::signal(10, true).raw(), [10, 0x8000_0000]);
        assert_eq!(kevent_id::signal(-1, false).signal_parts(), (-1, false));
        for (s, m) in [(1, false), (34, true), (64, false), (i32::MAX, true)] {
            assert_eq!(kevent_id::signal(s, m).signal_parts(), (s, m));
        }
    }

    #[test]
    fn ids_fit_their_type_p27_p28_p29() {
        use crate::{KEVENT_INODE, KEVENT_PIPE, KEVENT_POLL, KEVENT_SIGNAL, KEVENT_SOCKET};
        assert!(kevent_id::signal(10, true).fits(KEVENT_SIGNAL));
        assert!(kevent_id::signal(10, false).fits(KEVENT_SIGNAL));
        for bit in 32..63 {
            let id = kevent_id::from_u64(10 | (1 << bit));
            assert!(!id.fits(KEVENT_SIGNAL), "bit {bit}");
        }
        for t in [KEVENT_SOCKET, KEVENT_PIPE, KEVENT_POLL, KEVENT_INODE] {
            assert!(kevent_id::from_raw([3, 0]).fits(t));
            assert!(!kevent_id::from_raw([3, 1]).fits(t));
            assert!(!kevent_id::from_raw([3, 0x8000_0000]).fits(t));
        }
        assert!(kevent_id::from_raw([1, 2]).fits(crate::KEVENT_TIMER));
        assert!(kevent_id::from_u64(u64::MAX).fits(crate::KEVENT_UNOTIFY));
        assert_eq!(
            kevent_id::signal(10, true).signal_other_variant().as_u64(),
            kevent_id::signal(10, false).as_u64()
        );
    }

    #[test]
    fn id_words_and_u64_agree() {
        let id = kevent_id::from_raw([1, 2]);
        assert_eq!(id.as_u64(), 1 | (2 << 32));
        assert_eq!(kevent_id::from_u64(id.as_u64()).raw(), [1, 2]);
    }
}
