//! Console drawing cost: one frame with a 10,000-row aggregation (table pane focused, 120×40 and
//! 200×60), and taking in a 10,000-row snapshot (sorting, deltas, sparkline history).
//! Target: a frame in under 5 ms.

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use dtx::agg::snapshot::{AggRow, AggView, KeyCell, Snapshot};
use dtx::agg::AggValue;
use dtx::engine::session::{RunState, Status, Update};
use dtx::tui::app::{App, Focus};
use dtx::tui::ui;
use ratatui::backend::TestBackend;
use ratatui::Terminal;

fn snapshot(generation: u64, rows: usize) -> Snapshot {
    Snapshot {
        generation,
        time_ns: generation * 1_000_000_000,
        aggs: vec![AggView {
            name: "@bytes".into(),
            rows: (0..rows)
                .map(|i| AggRow {
                    keys: vec![
                        KeyCell::Text(format!("process{:05}.exe", i)),
                        KeyCell::Text((i % 64).to_string()),
                    ],
                    value: AggValue::Count((i as u64 * 7919 + generation * 13) % 100_000),
                })
                .collect(),
        }],
    }
}

fn app() -> App {
    let mut a = App::new(
        Arc::new(dtx::providers::standard_catalog()),
        Status {
            state: RunState::Running,
            generation: 1,
            position: Some((1, 2)),
            ..Status::new("bench.etl".into())
        },
        true,
    );
    a.focus = Focus::Results;
    a.on_update(Update::Snapshot(snapshot(1, 10_000)));
    a.on_update(Update::Snapshot(snapshot(2, 10_000)));
    a
}

fn frames(c: &mut Criterion) {
    let mut g = c.benchmark_group("tui");
    for (w, h) in [(120u16, 40u16), (200, 60)] {
        let app = app();
        let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
        g.bench_function(format!("frame_10k_rows_{w}x{h}"), |b| {
            b.iter(|| {
                term.draw(|f| {
                    ui::draw(f, &app);
                })
                .unwrap();
            })
        });
    }
    let mut app = app();
    g.bench_function("snapshot_10k_rows_update", |b| {
        b.iter(|| app.on_update(Update::Snapshot(snapshot(2, 10_000))))
    });
    g.finish();
}

criterion_group!(benches, frames);
criterion_main!(benches);
