//! `pg-query-bindings-regen HEADER OUT`: writes bindgen 0.66.1's declarations of HEADER
//! to OUT, exactly as `pg_query`'s build script would have had them generated.
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [header, out] = args.as_slice() else {
        eprintln!("usage: pg-query-bindings-regen HEADER OUT");
        return ExitCode::from(1);
    };
    let generated = match bindgen::Builder::default().header(header.as_str()).generate() {
        Ok(generated) => generated,
        Err(e) => {
            eprintln!("bindgen failed on {header}: {e}");
            return ExitCode::from(1);
        }
    };
    if let Err(e) = generated.write_to_file(out) {
        eprintln!("cannot write {out}: {e}");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
