//! Which SIMD instruction set this CPU runs, asked once at run time for each kernel set that
//! uses one (preprocessing's row kernels, motion's).
//!
//! Owns: [`SimdSet`] and the only run-time CPU feature checks of the crate. Must not: hold
//! kernels: a kernel set wraps a `SimdSet` it got from [`SimdSet::detect`] in a type of its own
//! that nothing else can make, and that is what makes calling its kernels sound.

/// An instruction set row kernels may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimdSet {
    /// No SIMD kernels: the portable code does everything.
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "aarch64")]
    Neon,
}

impl SimdSet {
    /// The best set this CPU runs: AVX2 on x86_64 (also with F16C when `f16c` asks for it),
    /// NEON on aarch64, else none.
    pub fn detect(f16c: bool) -> SimdSet {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && (!f16c || std::arch::is_x86_feature_detected!("f16c")) {
            return SimdSet::Avx2;
        }
        #[cfg(target_arch = "aarch64")]
        if std::arch::is_aarch64_feature_detected!("neon") {
            return SimdSet::Neon;
        }
        let _ = f16c;
        SimdSet::Portable
    }

    /// The set's name, for benchmarks and logs: "avx2", "neon" or "portable".
    pub fn name(self) -> &'static str {
        match self {
            SimdSet::Portable => "portable",
            #[cfg(target_arch = "x86_64")]
            SimdSet::Avx2 => "avx2",
            #[cfg(target_arch = "aarch64")]
            SimdSet::Neon => "neon",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detect_picks_the_cpus_simd_set() {
        #[cfg(target_arch = "aarch64")]
        let expected = "neon";
        #[cfg(target_arch = "x86_64")]
        let expected = if std::arch::is_x86_feature_detected!("avx2") { "avx2" } else { "portable" };
        #[cfg(not(any(target_arch = "aarch64", target_arch = "x86_64")))]
        let expected = "portable";
        assert_eq!(SimdSet::detect(false).name(), expected);
    }
}
