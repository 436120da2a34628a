//! Progress bars for the long commands: a bar with the rate and the time left on stderr for
//! work of known size (import, backup, restore, the LSM part of compact, the writing part of
//! export), a spinner with the time taken for work whose size is not known up front (row
//! compaction, export's query), and nothing at all when stderr is not a terminal, so scripts
//! and logs get only the summary line. The libraries report progress through callbacks; only
//! the binary draws.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How often the bar is redrawn: often enough to look alive, rarely enough to cost nothing.
const REDRAW_HZ: u8 = 8;

/// A progress bar on stderr, hidden when stderr is not a terminal.
#[derive(Debug)]
pub(crate) struct Bar(ProgressBar);

impl Bar {
    /// A bar counting bytes, for copies and files read.
    pub(crate) fn bytes(what: &str) -> Bar {
        Bar::new(
            what,
            "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}, {eta} left",
        )
    }

    /// A bar counting points, for points written.
    pub(crate) fn points(what: &str) -> Bar {
        Bar::new(
            what,
            "{msg} [{bar:30}] {human_pos}/{human_len} points {per_sec}, {eta} left",
        )
    }

    /// A spinner for work whose size is unknown, with the time it has taken.
    pub(crate) fn spinner(what: &str) -> Bar {
        let bar = Bar::new(what, "{spinner} {msg} {elapsed}");
        bar.0
            .enable_steady_tick(Duration::from_millis(1000 / u64::from(REDRAW_HZ)));
        bar
    }

    fn new(what: &str, template: &str) -> Bar {
        let target = if std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr_with_hz(REDRAW_HZ)
        } else {
            ProgressDrawTarget::hidden()
        };
        let style = ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        let bar = ProgressBar::with_draw_target(Some(0), target).with_style(style);
        bar.set_message(what.to_string());
        Bar(bar)
    }

    /// Sets how far the work got, and its size.
    pub(crate) fn update(&self, done: u64, total: u64) {
        self.0.set_length(total);
        self.0.set_position(done);
    }

    /// Replaces the text before the bar.
    pub(crate) fn set_message(&self, what: &str) {
        self.0.set_message(what.to_string());
    }

    /// Sets the work's size.
    pub(crate) fn set_total(&self, total: u64) {
        self.0.set_length(total);
    }

    /// Adds `n` to the work done.
    pub(crate) fn advance(&self, n: u64) {
        self.0.inc(n);
    }

    /// Removes the bar; the command prints its own summary.
    pub(crate) fn finish(&self) {
        self.0.finish_and_clear();
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        if !self.0.is_finished() {
            self.0.abandon();
        }
    }
}
