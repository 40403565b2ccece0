fn main() {
    std::process::exit(dtx::cli::main(std::env::args_os().collect()));
}
