//! Shared pieces of Strata's benchmarks: the seeded data generator.
