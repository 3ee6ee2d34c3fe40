//! `vidforge`: the command-line front of the service.

use std::process::ExitCode;

use clap::Parser;

/// A failure is one plain line on stderr (its causes after colons) and exit status 1, never a
/// Rust debug dump or backtrace: a mistyped setting reads like any command-line error.
fn main() -> ExitCode {
    vidforge::cli::init_tracing();
    let cli = vidforge::cli::Cli::parse();
    match vidforge::cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vidforge: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
