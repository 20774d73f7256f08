//! The README's two commands and `.ci/run` must agree: CI runs exactly the README's test
//! command, and the main-job command names something that exists.

use std::path::PathBuf;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The shell commands in the first fenced block after each README heading line that
/// starts with `Main job` / `Tests`.
fn readme_command(label: &str) -> String {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let start = readme
        .find(label)
        .unwrap_or_else(|| panic!("README has no '{label}' paragraph"));
    let rest = &readme[start..];
    let fence = rest.find("```sh\n").expect("a ```sh block after the label") + 6;
    let end = rest[fence..].find("```").expect("closing fence") + fence;
    let lines: Vec<&str> = rest[fence..end]
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(
        lines.len(),
        1,
        "one command expected under '{label}': {lines:?}"
    );
    lines[0].to_string()
}

#[test]
fn ci_runs_exactly_the_readme_test_command() {
    let test_cmd = readme_command("Tests —");
    assert!(test_cmd.starts_with("cargo "), "{test_cmd}");
    let ci = std::fs::read_to_string(repo().join(".ci/run")).expect(".ci/run");
    let commands: Vec<&str> = ci
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert_eq!(
        commands.last().copied(),
        Some(test_cmd.as_str()),
        ".ci/run must end with the README test command"
    );
    assert_eq!(
        commands
            .iter()
            .filter(|l| l.contains("cargo test") || l.contains("cargo nextest"))
            .count(),
        1,
        ".ci/run runs one test command"
    );
}

#[test]
fn main_job_command_exists_and_is_executable() {
    use std::os::unix::fs::PermissionsExt;
    let main_cmd = readme_command("Main job —");
    let script = main_cmd.split_whitespace().next().unwrap();
    let path = repo().join(script.trim_start_matches("./"));
    let meta = std::fs::metadata(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        meta.permissions().mode() & 0o111 != 0,
        "{} is not executable",
        path.display()
    );
    let ci = std::fs::metadata(repo().join(".ci/run")).unwrap();
    assert!(
        ci.permissions().mode() & 0o111 != 0,
        ".ci/run is not executable"
    );
}
