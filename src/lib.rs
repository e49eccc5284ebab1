//! libkevent: the kevent ABI as a C library (work in progress).
