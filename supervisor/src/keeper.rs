//! `mur-keeper`: the keeper of one harness attempt (`mur __contain`) as a binary of its own.
//! It is what `mur` would run, without the rest of `mur`: capsules exec it for every attempt,
//! and a binary a tenth the size starts in a fraction of the time (capsule::process::keeper_exe).

fn main() {
    let mut args = std::env::args_os().skip(1);
    match args.next() {
        Some(a) if a == capsule::process::keeper::SUBCOMMAND => {
            std::process::exit(capsule::process::keeper::main(args))
        }
        _ => {
            eprintln!(
                "error: mur-keeper keeps a capsule's harness attempts and is started by a \
                 capsule, not by hand (mur {} …)",
                capsule::process::keeper::SUBCOMMAND
            );
            std::process::exit(2)
        }
    }
}
