//! The console's panes drawn on ratatui's TestBackend and compared with the snapshots in
//! `tests/snapshots/` (run with `UPDATE_SNAPSHOTS=1` to rewrite them after an intended change),
//! and drawn at every size down to 1×1 without a panic.

use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use dtx::agg::snapshot::{AggRow, AggView, KeyCell, Snapshot};
use dtx::agg::AggValue;
use dtx::engine::session::{Command, RunState, Speed, Status, Update};
use dtx::tui::app::{App, Focus, Overlay};
use dtx::tui::ui;
use ratatui::backend::TestBackend;
use ratatui::Terminal;

fn status(state: RunState, generation: u64) -> Status {
    Status {
        state,
        generation,
        source: "trace.etl".into(),
        position: Some((5_000_000_000, 10_000_000_000)),
        speed: Speed::Times(10),
        events: 1000,
        events_per_s: 2_500_000.0,
        firings: 500,
        firings_per_s: 125_000.0,
        drops: 3,
        errors: 1,
        sessions: Vec::new(),
        lost: 0,
    }
}

fn app() -> App {
    let mut a = App::new(
        Arc::new(dtx::providers::standard_catalog()),
        status(RunState::Idle, 0),
        true,
    );
    let dir = std::env::temp_dir().join(format!("dtx-tui-test-{}", std::process::id()));
    a.editor.set_autosave_path(dir.join("autosave.d"));
    a
}

fn counts(generation: u64, rows: &[(&str, u64)]) -> Snapshot {
    Snapshot {
        generation,
        time_ns: generation * 1_000_000_000,
        aggs: vec![AggView {
            name: "@calls".into(),
            rows: rows
                .iter()
                .map(|(k, v)| AggRow {
                    keys: vec![KeyCell::Text(k.to_string())],
                    value: AggValue::Count(*v),
                })
                .collect(),
        }],
    }
}

fn render(app: &mut App, w: u16, h: u16) -> String {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    let mut areas = app.areas;
    term.draw(|f| areas = ui::draw(f, app)).unwrap();
    app.areas = areas;
    let buf = term.backend().buffer().clone();
    let mut s = String::new();
    for y in 0..h {
        for x in 0..w {
            s.push_str(buf[(x, y)].symbol());
        }
        s.push('\n');
    }
    s
}

fn check_snapshot(name: &str, text: &str) {
    crate::support::golden::check(
        &format!("snapshot {name}"),
        &format!("snapshots/{name}.txt"),
        text,
    );
}

fn type_text(app: &mut App, s: &str) {
    for c in s.chars() {
        let code = if c == '\n' {
            KeyCode::Enter
        } else {
            KeyCode::Char(c)
        };
        app.on_key(KeyEvent::new(code, KeyModifiers::NONE));
    }
}

#[test]
fn editor_pane_highlights_and_shows_compile_errors() {
    let mut a = app();
    a.focus = Focus::Editor;
    type_text(&mut a, "BEGIN\n{\n\t@calls[\"x\"] = count();\n\ty = ;\n}");
    a.run(false);
    // a compile error: nothing is sent to the engine, the error shows at its line
    assert!(a.outbox.is_empty());
    let d = a.editor.diagnostic.clone().expect("a diagnostic");
    assert_eq!(d.tag, "D_SYNTAX");
    assert_eq!(d.line, 4);
    let screen = render(&mut a, 80, 24);
    assert!(screen.contains("D_SYNTAX"), "{screen}");
    assert!(
        screen.contains("line 4: syntax error near \";\""),
        "{screen}"
    );
    check_snapshot("editor_error_80x24", &screen);
}

#[test]
fn results_pane_table_sorted_with_deltas() {
    let mut a = app();
    a.focus = Focus::Results;
    a.on_update(Update::Status(status(RunState::Running, 1)));
    a.on_update(Update::Snapshot(counts(
        1,
        &[("read", 10), ("write", 40), ("open", 5)],
    )));
    a.on_update(Update::Snapshot(counts(
        1,
        &[("read", 70), ("write", 41), ("open", 5)],
    )));
    let screen = render(&mut a, 100, 30);
    let rows: Vec<&str> = screen
        .lines()
        .filter(|l| l.contains("read") || l.contains("write") || l.contains("open "))
        .collect();
    assert!(
        rows[0].contains("read") && rows[0].contains("+60"),
        "{screen}"
    );
    assert!(rows[1].contains("write"), "{screen}");
    check_snapshot("results_table_100x30", &screen);
    // sort by key: open, read, write
    a.on_key(KeyEvent::new(KeyCode::Char('s'), KeyModifiers::NONE));
    a.on_key(KeyEvent::new(KeyCode::Char('s'), KeyModifiers::NONE));
    let t = &a.results.tables["@calls"];
    let keys: Vec<&str> = t.rows.iter().map(|r| r.keys[0].as_str()).collect();
    assert_eq!(keys, ["open", "read", "write"]);
}

#[test]
fn results_pane_histogram_and_stacks() {
    let mut a = app();
    a.focus = Focus::Results;
    let mut b = vec![0i64; 127];
    b[64 + 10] = 40;
    b[64 + 12] = 10;
    let snap = Snapshot {
        generation: 1,
        time_ns: 0,
        aggs: vec![
            AggView {
                name: "@lat".into(),
                rows: vec![AggRow {
                    keys: vec![KeyCell::Text("powerpnt.exe".into())],
                    value: AggValue::Quantize(b),
                }],
            },
            AggView {
                name: "@stacks".into(),
                rows: vec![
                    AggRow {
                        keys: vec![KeyCell::Stack(vec!["ntdll+0x10".into(), "app+0x20".into()])],
                        value: AggValue::Count(3),
                    },
                    AggRow {
                        keys: vec![KeyCell::Stack(vec!["kernel+0x5".into(), "app+0x20".into()])],
                        value: AggValue::Count(1),
                    },
                ],
            },
        ],
    };
    a.on_update(Update::Snapshot(snap));
    let screen = render(&mut a, 100, 30);
    assert!(
        screen.contains("1024 │") || screen.contains("1024 "),
        "{screen}"
    );
    assert!(screen.contains("distribution"), "{screen}");
    check_snapshot("results_histogram_100x30", &screen);
    a.on_key(KeyEvent::new(KeyCode::Right, KeyModifiers::NONE));
    let screen = render(&mut a, 100, 30);
    assert!(screen.contains("100.0%"), "{screen}");
    assert!(screen.contains("75.0%"), "{screen}");
    check_snapshot("results_stacks_100x30", &screen);
}

#[test]
fn browser_filter_and_skeleton() {
    let mut a = app();
    a.focus = Focus::Browser;
    type_text(&mut a, "tick-1s");
    let screen = render(&mut a, 80, 24);
    assert!(screen.contains("/tick-1s"), "{screen}");
    check_snapshot("browser_filter_80x24", &screen);
    // select the probe itself and insert its clause
    let leaf = a.browser.rows().iter().position(|r| r.leaf).unwrap();
    a.browser.selected = leaf;
    a.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    assert_eq!(a.focus, Focus::Editor);
    assert!(
        a.editor.text().starts_with("profile:::tick-1sec\n{"),
        "{}",
        a.editor.text()
    );
    a.run(false);
    assert!(matches!(
        a.outbox.as_slice(),
        [Command::Run { restart: false, .. }]
    ));
}

#[test]
fn log_status_and_help() {
    let mut a = app();
    a.on_update(Update::Output("first line\nsecond line\n".into()));
    a.on_update(Update::Status(status(RunState::Paused, 2)));
    let screen = render(&mut a, 120, 30);
    assert!(screen.contains("second line"), "{screen}");
    assert!(screen.contains("‖ paused"), "{screen}");
    assert!(screen.contains("5.0s/10.0s 10x"), "{screen}");
    check_snapshot("log_status_120x30", &screen);
    a.on_key(KeyEvent::new(KeyCode::F(1), KeyModifiers::NONE));
    assert_eq!(a.overlay, Some(Overlay::Help));
    let screen = render(&mut a, 100, 40);
    for key in ["F5", "Ctrl-R", "Ctrl-S", "F8", "F9", "Ctrl-Q"] {
        assert!(screen.contains(key), "{key} missing from help:\n{screen}");
    }
    check_snapshot("help_100x40", &screen);
}

/// F1 on a wide terminal shows every entry of the help (two columns), not the first 32.
#[test]
fn help_fits_on_a_wide_terminal() {
    let mut a = app();
    a.overlay = Some(Overlay::Help);
    let lines = dtx::tui::panes::overlay::help_lines(&a);
    assert!(
        lines.len() > 32,
        "{} help lines: the test needs more than one box",
        lines.len()
    );
    let screen = render(&mut a, 170, 50);
    for (_, what) in &lines {
        let head: String = what.chars().take(20).collect();
        assert!(
            screen.contains(&head),
            "'{head}' missing from help at 170x50:\n{screen}"
        );
    }
    // narrow and short still draw
    render(&mut a, 20, 5);
    render(&mut a, 120, 10);
}

#[test]
fn every_size_draws_without_panic() {
    let mut a = app();
    a.on_update(Update::Snapshot(counts(1, &[("a", 1), ("b", 2)])));
    a.on_update(Update::Output("x\n".into()));
    type_text(&mut a, "BEGIN { x = ; }");
    a.run(false);
    for focus in [Focus::Browser, Focus::Editor, Focus::Results, Focus::Log] {
        a.focus = focus;
        for overlay in [None, Some(Overlay::Help)] {
            a.overlay = overlay;
            for w in (1..=100).step_by(7) {
                for h in (1..=40).step_by(3) {
                    render(&mut a, w, h);
                }
            }
            render(&mut a, 20, 5);
        }
    }
    // 20x5 still shows the focused pane and the status line
    a.overlay = None;
    a.focus = Focus::Results;
    let s = render(&mut a, 20, 5);
    assert!(s.contains("Aggreg"), "{s}");
}

#[test]
fn browser_shows_the_members_of_struct_arguments() {
    let mut a = app();
    a.browser = dtx::tui::probe_tree::ProbeTree::new(vec![dtx::probes::ProbeInfo {
        id: 1,
        provider: "proc".into(),
        module: String::new(),
        function: String::new(),
        name: "exec-success".into(),
        arg_native: Vec::new(),
        arg_types: vec!["psinfo_t *".into(), "int".into()],
    }]);
    a.focus = Focus::Browser;
    type_text(&mut a, "exec");
    let leaf = a.browser.rows().iter().position(|r| r.leaf).unwrap();
    a.browser.selected = leaf;
    let screen = render(&mut a, 100, 40);
    assert!(screen.contains("args[0] psinfo_t *"), "{screen}");
    assert!(screen.contains("->pr_pid"), "{screen}");
    assert!(screen.contains("pid_t"), "{screen}");
    check_snapshot("browser_struct_args_100x40", &screen);
    // a small pane keeps the tree and drops members first
    let small = render(&mut a, 60, 12);
    assert!(!small.contains("->pr_pid"), "{small}");
}
