/// The stack dtx's command line runs on: deep D expressions are evaluated recursively, and a
/// Windows main thread has 1 MB where Linux gives 8 MB; the same ample stack everywhere.
const MAIN_STACK: usize = 64 << 20;

fn main() {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let code = std::thread::Builder::new()
        .name("dtx".into())
        .stack_size(MAIN_STACK)
        .spawn(move || dtx::cli::main(argv))
        .map(|h| h.join().unwrap_or(101))
        .unwrap_or_else(|e| {
            eprintln!("dtx: cannot start: {e}");
            70
        });
    std::process::exit(code);
}
