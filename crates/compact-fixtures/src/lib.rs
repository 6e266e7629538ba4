//! What the synthetic sessions of `compact demo`, the soak harness
//! (`compact-soak`) and the benchmarks (`compact-bench`) share, in a crate
//! of its own so that the product binary links none of the benchmarks.
//!
//! - [`Rng`] (private module `rng`): the seeded, reproducible generator
//!   every synthetic session draws from.

mod rng;

pub use rng::Rng;
