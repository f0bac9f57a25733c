//! The `skillc` command line.

use std::process::ExitCode;

fn main() -> ExitCode {
    end_quietly_on_broken_pipe();
    skillc_runtime::model::memory::one_arena_under_address_limit();
    skillc::cli::run(skillc::cli::Cli::parse_with_exit_codes())
}

/// `skillc graph … | head`: once the reader of stdout has gone, `println!` panics
/// with "failed printing to stdout: Broken pipe". A filter whose reader stopped
/// listening has done its job, so that one case ends quietly with exit 0, as Unix
/// tools do; every other panic is reported as the bug it is.
fn end_quietly_on_broken_pipe() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(0);
        }
        report(info);
    }));
}
