//! Replays the `render` fuzz target's inputs: minimised findings in `fuzz/regressions/render/` and the
//! hand-written seeds in `fuzz/seeds/render/`. Each goes through the target's own steps (split at the
//! first 0x00, load, parse the request, render under lowered limits) and must return, `Ok` or `Err`.
//!
//! A finding can be a stack overflow or a hang, which no `catch_unwind` stops, so each input runs in
//! a child process: this test binary again, running this one test with `CHILD_INPUT` set. A crash or
//! timeout is then reported against its file and the other inputs (and tests) still run. The child
//! runs on an ordinary test thread (2 MiB unless `RUST_MIN_STACK` says otherwise, the size of a
//! spawned or async worker thread) and under the memory guard `main.rs` installs, as the fuzz
//! target does.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use parlance::{ChatTemplate, RenderRequest, TemplateError, TemplateSource};

/// Set (to an input file) in the child process that replays that one input.
const CHILD_INPUT: &str = "PARLANCE_FUZZ_REPLAY_INPUT";

/// The child prints this, then the outcome's name, once the input returned.
const OUTCOME_MARKER: &str = "fuzz replay outcome: ";

/// The fuzzer's `-timeout`; a seed or fixed finding takes milliseconds.
const CHILD_TIMEOUT: Duration = Duration::from_secs(10);

// `split_render_input` and `DEFAULT_REQUEST`, as the target has them.
include!("../../../../fuzz/fuzz_targets/render_input.rs");

/// What `ChatTemplate::render` returns under the guard when the render thread panicked.
const RENDER_PANICKED: &str = "render stopped: Panic";

/// The fuzz target (`fuzz/fuzz_targets/render.rs`) as a function; returns the outcome's name.
fn replay(data: &[u8]) -> &'static str {
    let (template, request) = split_render_input(data);
    let (Ok(template), Ok(request)) = (std::str::from_utf8(&template), std::str::from_utf8(request)) else {
        return "rejected";
    };
    let limits = fuzz_limits();
    let Ok(chat) = ChatTemplate::from_source(TemplateSource::from_text("<fuzz>", template), limits) else {
        return "rejected";
    };
    let parts = RenderRequest::from_json(Path::new("<fuzz>"), request).and_then(RenderRequest::into_parts);
    let Ok((conversation, options)) = parts else {
        return "rejected";
    };
    match chat.render(&conversation, &options) {
        Ok(_) => "rendered",
        Err(TemplateError::Render { message, .. }) if message == RENDER_PANICKED => "render thread panicked",
        Err(_) => "failed",
    }
}

/// The fuzz crate, `fuzz/` at the repository root.
fn fuzz_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The `render` target's inputs of one kind: `regressions` or `seeds`.
fn fuzz_dir(folder: &str) -> PathBuf {
    fuzz_root().join(folder).join("render")
}

/// The input files of `dir`, sorted; dotfiles (`.gitkeep`) are not inputs. A missing folder has none.
fn inputs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|entry| entry.expect("readable folder entry").path())
        .filter(|path| path.is_file() && !path.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')))
        .collect();
    files.sort();
    files
}

/// Replays `input` in a child process; returns the outcome's name, or why there is none.
fn replay_in_child(input: &Path) -> Result<String, String> {
    // libtest filters by the path below the crate: `fuzz_regressions::fuzz_regressions_do_not_panic`.
    let module = module_path!().split_once("::").map_or("", |(_, rest)| rest);
    let test = format!("{module}::fuzz_regressions_do_not_panic");
    let mut child = Command::new(std::env::current_exe().expect("the test binary's path"))
        .args([test.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_INPUT, input)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the child: {e}"))?;
    // Drain both pipes while waiting so a chatty child cannot block on a full pipe.
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let deadline = Instant::now() + CHILD_TIMEOUT;
    let status = loop {
        match child.try_wait().map_err(|e| format!("cannot wait for the child: {e}"))? {
            Some(status) => break Some(status),
            None if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    let tail: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).rev().take(3).collect();
    let tail = tail.into_iter().rev().collect::<Vec<_>>().join(" | ");
    let Some(status) = status else {
        return Err(format!("did not return within {} s (hang or runaway render)", CHILD_TIMEOUT.as_secs()));
    };
    // libtest prints `test <name> ... ` on the same line before the test's own output.
    let outcome = stdout.lines().find_map(|line| line.split_once(OUTCOME_MARKER).map(|(_, outcome)| outcome.trim()));
    match outcome {
        Some(outcome) if status.success() => Ok(outcome.to_owned()),
        _ => Err(format!("child exited with {status}; stderr: {tail}")),
    }
}

#[test]
fn fuzz_regressions_do_not_panic() {
    if let Some(input) = std::env::var_os(CHILD_INPUT) {
        let data = std::fs::read(&input).expect("readable fuzz input");
        println!("{OUTCOME_MARKER}{}", replay(&data));
        return;
    }
    let regressions = inputs(&fuzz_dir("regressions"));
    let seeds = inputs(&fuzz_dir("seeds"));
    assert!(!seeds.is_empty(), "no seeds found in {}", fuzz_dir("seeds").display());
    let mut failures = Vec::new();
    let mut returned = 0;
    for (input, is_seed) in regressions.iter().map(|p| (p, false)).chain(seeds.iter().map(|p| (p, true))) {
        let name = input.strip_prefix(fuzz_root()).unwrap_or(input).display();
        match replay_in_child(input) {
            Ok(outcome) if outcome == "render thread panicked" => failures.push(format!("{name}: {outcome}")),
            // Seeds are valid templates and requests: rendering them proves the replay reaches `render`.
            Ok(outcome) if is_seed && outcome != "rendered" => {
                failures.push(format!("{name}: a seed must render, got {outcome}"));
            }
            Ok(_) => returned += 1,
            Err(why) => failures.push(format!("{name}: {why}")),
        }
    }
    assert!(failures.is_empty(), "{} fuzz input(s) failed:\n{}", failures.len(), failures.join("\n"));
    assert_eq!(returned, regressions.len() + seeds.len(), "every input returned");
}
