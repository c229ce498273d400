//! Time limits that hold on a busy two-core box. Measurements are taken one at a time
//! (the suite's other threads wait), each limit is checked on the best of several runs, and
//! a failing check is measured again before it counts. Under nextest every test is a
//! process of its own, which this lock cannot hold back: `.config/nextest.toml` runs the
//! ratio checks alone instead.

use proptest::test_runner::TestCaseError;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// The most one call may take. Unoptimised, the slowest linear case (200 KB of one-letter
/// Twilio parameters, 100 000 of them) takes about 110 ms on an idle box, so the bound is
/// nearly five times that; it catches the catastrophic, and the ratio check below the
/// merely quadratic.
const TIME_BOUND: Duration = if cfg!(debug_assertions) {
    Duration::from_millis(500)
} else {
    Duration::from_millis(100)
};

/// How much larger the large input of a ratio check is than the small one.
pub(crate) const SCALE: usize = 8;
/// The size of the small input of a ratio check; the large one, [`SCALE`] times that, is
/// 200 KB.
pub(crate) const SMALL_LEN: usize = 25 * 1024;
/// How many times the linear expectation the large input may take: caches and the
/// allocator make large inputs somewhat slower per byte; quadratic work is [`SCALE`] times
/// the linear expectation.
const TOLERANCE: u32 = 3;
/// Forgiven on top: timer and scheduler noise on calls of a millisecond or two.
const RATIO_SLACK: Duration = Duration::from_millis(10);

/// Held while measuring, so two test threads never measure against each other.
static MEASURING: Mutex<()> = Mutex::new(());

fn measuring() -> MutexGuard<'static, ()> {
    // A panic while measuring is the finding itself; later measurements go on.
    MEASURING.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs `call` and fails the case if it takes longer than [`TIME_BOUND`]. A slow run is
/// measured twice more and the best of the three counts.
pub(crate) fn timed<T>(what: &str, mut call: impl FnMut() -> T) -> Result<T, TestCaseError> {
    let _measuring = measuring();
    let started = Instant::now();
    let out = call();
    let mut best = started.elapsed();
    for _ in 0..2 {
        if best <= TIME_BOUND {
            break;
        }
        let started = Instant::now();
        drop(call());
        best = best.min(started.elapsed());
    }
    if best > TIME_BOUND {
        return Err(TestCaseError::fail(format!(
            "{what} took {best:?} (bound {TIME_BOUND:?})"
        )));
    }
    Ok(out)
}

/// Fails if `call(large)` takes more than [`TOLERANCE`] times the linear expectation from
/// `call(small)` (`large` being [`SCALE`] times `small`): linear work grows [`SCALE`]
/// times, quadratic work [`SCALE`]² times. The two sizes are run in turn, so a burst of
/// load hits both alike, and the best run of each counts; up to five rounds of three.
pub(crate) fn scales_linearly<I: ?Sized, T>(
    what: &str,
    small: &I,
    large: &I,
    call: impl Fn(&I) -> T,
) -> Result<(), TestCaseError> {
    let run = |input: &I| {
        let started = Instant::now();
        std::hint::black_box(call(std::hint::black_box(input)));
        started.elapsed()
    };
    let limit = |small: Duration| small * (TOLERANCE * SCALE as u32) + RATIO_SLACK;
    let _measuring = measuring();
    let (mut s, mut l) = (Duration::MAX, Duration::MAX);
    for _ in 0..5 {
        for _ in 0..3 {
            s = s.min(run(small));
            l = l.min(run(large));
        }
        if l <= limit(s) {
            return Ok(());
        }
    }
    Err(TestCaseError::fail(format!(
        "{what}: {l:?} on the large input, {s:?} on one {SCALE}x smaller (limit {:?})",
        limit(s)
    )))
}
