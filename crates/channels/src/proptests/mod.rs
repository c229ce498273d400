//! Property tests: no webhook body, however hostile, makes a parser panic or take more than
//! linear time (issue 24, item 8). A panic is a 500 that the provider retries with the same
//! body (and Slack disables a subscription that keeps failing); a quadratic pass over a
//! large body holds a core for seconds per request. The entry points are the ones the
//! webhook handler calls ([`crate::verify_and_parse`], with bodies signed as each provider
//! signs them so the parsers are reached) and [`crate::email::html_to_text`], which the
//! inbound email job also calls.
//!
//! Each channel's properties are in its folder (`whatsapp/proptests.rs`, …); this module
//! holds what they share: the inputs, the edits of a JSON payload, the time limits, and the
//! properties that go across channels (`webhooks`) or belong to none ([`crate::cap_text`]).
//!
//! Time is checked twice: every call within an absolute bound, and, on inputs made of a
//! repeated unit, an 8x larger input taking no more than about 8x as long. The bound alone
//! misses a quadratic whose inner loop is a vectorised library call (lowercasing the rest
//! of a document at each tag takes about 140 ms at 200 KB, under the bound); the ratio
//! does not.
//!
//! In `cargo test` they run 64 cases each (16 for the ratios) from a fixed seed, so the
//! suite is deterministic; `scripts/fuzz-parsers.sh` runs them long with `PROPTEST_CASES`
//! and a seed of its own.

mod cap_text;
pub(crate) mod edits;
pub(crate) mod inputs;
mod timing;
pub(crate) mod webhooks;

pub(crate) use timing::{SCALE, SMALL_LEN, scales_linearly, timed};

use proptest::test_runner::{Config, RngSeed};

/// Cases per property when `PROPTEST_CASES` is not set.
const SUITE_CASES: u32 = 64;
/// The seed when `PROPTEST_RNG_SEED` is not set, so the suite sees the same inputs each run.
const SUITE_SEED: u64 = 0x5b_24_08;

/// The suite's configuration: fixed seed, 64 cases, nothing written to disk; the two
/// `PROPTEST_*` variables still apply so the fuzz script can run long and replay a seed.
pub(crate) fn config() -> Config {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.trim().parse().ok());
    Config {
        cases: env("PROPTEST_CASES")
            .and_then(|n: u64| u32::try_from(n).ok())
            .unwrap_or(SUITE_CASES),
        rng_seed: RngSeed::Fixed(env("PROPTEST_RNG_SEED").unwrap_or(SUITE_SEED)),
        failure_persistence: None,
        // A failing 200 KB input shrinks slowly; a minute of shrinking is plenty.
        max_shrink_time: 60_000,
        ..Config::default()
    }
}

/// The ratio properties' configuration: a quarter of the cases, since each case runs the
/// call at least six times.
pub(crate) fn ratio_config() -> Config {
    let config = config();
    Config {
        cases: (config.cases / 4).max(1),
        ..config
    }
}
