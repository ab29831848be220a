//! Progress of the long commands (the DCQCN experiments here; the fuzz campaigns of
//! `hematite-fuzz`): a bar with the count and an estimate of the time left, on
//! stderr, drawn by indicatif only when stderr is a terminal. Redirected to a file or a pipe
//! (a log, CI) the bar is hidden and prints nothing, so such output stays as it was.

use indicatif::{ProgressBar, ProgressStyle};

/// A bar of `len` steps counted in `unit` (runs, cases, messages).
pub fn bar(len: u64, unit: &str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    let template = format!("{{elapsed_precise}} [{{wide_bar}}] {{human_pos}}/{{human_len}} {unit}, about {{eta}} left {{msg}}");
    pb.set_style(ProgressStyle::with_template(&template).expect("a valid progress template").progress_chars("=> "));
    pb
}

#[cfg(test)]
mod tests {
    use std::io::IsTerminal;

    /// Drawn on a terminal, hidden otherwise (cargo test captures stderr: hidden there).
    #[test]
    fn the_bar_is_hidden_unless_stderr_is_a_terminal() {
        let pb = super::bar(10, "cases");
        assert_eq!(pb.is_hidden(), !std::io::stderr().is_terminal());
        pb.inc(3);
        assert_eq!(pb.position(), 3);
        pb.finish_and_clear();
    }
}
