//! Profiling aid: N=100, A=1 kevent rounds only (for callgrind).
use kevent_fallback as kf;
use kevent_sys::*;
fn main() {
    let mut sv = [0; 2];
    // SAFETY: valid out array.
    unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, sv.as_mut_ptr()) };
    // SAFETY: no ring.
    let q = unsafe { kf::kevent_init(std::ptr::null_mut(), 0, 0) }.unwrap();
    let mut add = [ukevent::new(
        KEVENT_SOCKET,
        kevent_id::from_raw([sv[0] as u32, 0]),
        KEVENT_SOCKET_RECV,
        0,
    )];
    kf::kevent_ctl(q, KEVENT_CTL_ADD, &mut add).unwrap();
    let mut kb = vec![ukevent::default(); 256];
    let forever = kevent_sys::FOREVER;
    let mut b = 0u8;
    for _ in 0..20000 {
        // SAFETY: one byte from a static / into `b`.
        unsafe { libc::write(sv[1], b"x".as_ptr().cast(), 1) };
        kf::kevent_get_events(q, 1, &mut kb, &forever, 0).unwrap();
        // SAFETY: as above.
        unsafe { libc::read(sv[0], (&mut b as *mut u8).cast(), 1) };
    }
}
