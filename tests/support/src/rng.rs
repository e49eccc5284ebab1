//! Randomness: the project's one PRNG (`kevent-test-rng`), and build facts for sizing.

pub use kevent_test_rng::Rng;

/// Whether this is an optimized build (for sizing load tests).
pub const RELEASE: bool = !cfg!(debug_assertions);
