//! Any text as an experiment file, and as a `--set` override: errors are fine, panics are not.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nertrain_train::Experiment;

fuzz_target!(|bytes: &[u8]| {
    let Ok(text) = std::str::from_utf8(bytes) else { return };
    if let Ok(experiment) = Experiment::parse(text, &[]) {
        // A parsed experiment always serialises and parses back to itself.
        let again = Experiment::parse(&experiment.to_toml(), &[]).expect("a resolved experiment parses");
        assert_eq!(again.to_toml(), experiment.to_toml());
    }
    let minimal = "[data]\ntrain = \"a\"\ndev = \"b\"\n";
    let _ = Experiment::parse(minimal, &[text.to_string()]);
});
