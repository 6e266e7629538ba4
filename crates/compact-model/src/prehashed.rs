//! The hasher for maps whose keys are hashes already (content hashes in the
//! count cache, shape keys in the fact ledger): SipHash over them again would
//! only cost time.

use std::hash::Hasher;

/// Takes a `u64` key as its hash and the low half of a `u128` one (both
/// already well mixed); anything else still hashes, with FNV-1a.
#[derive(Debug, Default, Clone, Copy)]
pub struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }

    fn write_u128(&mut self, n: u128) {
        // Truncation is the point: the low half of an xxh3 hash is already well mixed.
        self.0 ^= n as u64;
    }
}
