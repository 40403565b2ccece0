//! Renders the screenshots in `assets/` from real console sessions: the release binary runs in a
//! pseudo-terminal over traces from `../shared/etl/`, keys are typed as a user would, and the
//! terminal's screen (characters and colours, as a vt100 terminal holds them) is drawn to PNG
//! with an 8×8 bitmap font. Run: `cargo build --release && cargo run --release --example screenshots`.

#[path = "../tests/it/support/pty.rs"]
mod pty;

use std::path::{Path, PathBuf};
use std::time::Duration;

use font8x8::UnicodeFonts;
use pty::{PtySession, F5};

const COLS: u16 = 120;
const ROWS: u16 = 36;

struct Palette {
    fg: [u8; 3],
    bg: [u8; 3],
}

const DARK: Palette = Palette {
    fg: [0xc8, 0xc8, 0xc8],
    bg: [0x12, 0x16, 0x1c],
};
const LIGHT: Palette = Palette {
    fg: [0x20, 0x20, 0x20],
    bg: [0xfa, 0xfa, 0xf7],
};

fn ansi(i: u8) -> [u8; 3] {
    const BASE: [[u8; 3]; 16] = [
        [0x00, 0x00, 0x00],
        [0xcd, 0x31, 0x31],
        [0x0d, 0xbc, 0x79],
        [0xe5, 0xe5, 0x10],
        [0x24, 0x72, 0xc8],
        [0xbc, 0x3f, 0xbc],
        [0x11, 0xa8, 0xcd],
        [0xc8, 0xc8, 0xc8],
        [0x66, 0x66, 0x66],
        [0xf1, 0x4c, 0x4c],
        [0x23, 0xd1, 0x8b],
        [0xf5, 0xf5, 0x43],
        [0x3b, 0x8e, 0xea],
        [0xd6, 0x70, 0xd6],
        [0x29, 0xb8, 0xdb],
        [0xf5, 0xf5, 0xf5],
    ];
    if i < 16 {
        return BASE[i as usize];
    }
    if i < 232 {
        let i = i - 16;
        let c = |v: u8| if v == 0 { 0 } else { 55 + v * 40 };
        return [c(i / 36), c((i / 6) % 6), c(i % 6)];
    }
    let g = 8 + (i - 232) * 10;
    [g, g, g]
}

fn color(c: vt100::Color, default: [u8; 3]) -> [u8; 3] {
    match c {
        vt100::Color::Default => default,
        vt100::Color::Idx(i) => ansi(i),
        vt100::Color::Rgb(r, g, b) => [r, g, b],
    }
}

/// Glyphs the bitmap font lacks, drawn here (rows top to bottom, bit 0 leftmost).
fn extra_glyph(c: char) -> Option<[u8; 8]> {
    Some(match c {
        '●' => [0x00, 0x3c, 0x7e, 0x7e, 0x7e, 0x7e, 0x3c, 0x00],
        '○' => [0x00, 0x3c, 0x42, 0x42, 0x42, 0x42, 0x3c, 0x00],
        '■' => [0x00, 0x7e, 0x7e, 0x7e, 0x7e, 0x7e, 0x7e, 0x00],
        '▸' => [0x00, 0x04, 0x0c, 0x1c, 0x0c, 0x04, 0x00, 0x00],
        '▾' => [0x00, 0x00, 0x3e, 0x1c, 0x08, 0x00, 0x00, 0x00],
        '▲' => [0x00, 0x08, 0x1c, 0x3e, 0x7f, 0x00, 0x00, 0x00],
        '▼' => [0x00, 0x7f, 0x3e, 0x1c, 0x08, 0x00, 0x00, 0x00],
        '‖' => [0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24, 0x24],
        '…' => [0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x49, 0x00],
        '▏' => [0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01],
        _ => return None,
    })
}

fn glyph(c: char) -> [u8; 8] {
    font8x8::BASIC_FONTS
        .get(c)
        .or_else(|| font8x8::BOX_FONTS.get(c))
        .or_else(|| font8x8::BLOCK_FONTS.get(c))
        .or_else(|| font8x8::LATIN_FONTS.get(c))
        .or_else(|| font8x8::GREEK_FONTS.get(c))
        .or_else(|| font8x8::MISC_FONTS.get(c))
        .or_else(|| extra_glyph(c))
        .unwrap_or([0x00, 0x3c, 0x24, 0x24, 0x24, 0x24, 0x3c, 0x00])
}

/// Draws the terminal's screen: each cell 8×16 pixels (the font's rows doubled).
fn render(screen: &vt100::Screen, pal: &Palette, path: &Path) {
    let (rows, cols) = screen.size();
    let (cw, ch) = (8usize, 16usize);
    let (w, h) = (cols as usize * cw, rows as usize * ch);
    let mut px = vec![0u8; w * h * 3];
    for r in 0..rows {
        for c in 0..cols {
            let Some(cell) = screen.cell(r, c) else {
                continue;
            };
            let mut fg = color(cell.fgcolor(), pal.fg);
            let mut bg = color(cell.bgcolor(), pal.bg);
            if cell.inverse() {
                std::mem::swap(&mut fg, &mut bg);
            }
            let ch_ = cell.contents().chars().next().unwrap_or(' ');
            let g = glyph(ch_);
            // full-height blocks and vertical lines must join the next row: repeat the
            // glyph's last row in the cell's bottom lines
            for y in 0..ch {
                let row = g[(y / 2).min(7)];
                for x in 0..cw {
                    let on = row & (1 << x) != 0
                        || (cell.bold()
                            && x > 0
                            && row & (1 << (x - 1)) != 0
                            && ch_.is_alphanumeric());
                    let p = ((r as usize * ch + y) * w + c as usize * cw + x) * 3;
                    px[p..p + 3].copy_from_slice(if on { &fg } else { &bg });
                }
            }
        }
    }
    let file = std::fs::File::create(path).expect("create png");
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), w as u32, h as u32);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut wr = enc.write_header().expect("png header");
    wr.write_image_data(&px).expect("png data");
    println!("wrote {}", path.display());
}

fn session(args: &[&str]) -> PtySession {
    let state = std::env::temp_dir().join("dtx-screenshots");
    let state = state.to_string_lossy().into_owned();
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/dtx");
    PtySession::spawn(
        &bin.to_string_lossy(),
        args,
        &[("XDG_STATE_HOME", &state), ("XDG_CONFIG_HOME", &state)],
        COLS,
        ROWS,
    )
}

fn shot(s: &PtySession, pal: &Palette, name: &str) {
    std::thread::sleep(Duration::from_millis(400));
    let parser = s.screen.lock().unwrap();
    render(
        parser.screen(),
        pal,
        &PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("assets")
            .join(name),
    );
}

fn main() {
    let etl = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/etl");
    let ppt = etl.join("randomascii_slow_ppt_trace.etl.zip");
    let net = etl.join("perfview_net.4.5.2.x64.etl.zip");
    if !ppt.exists() {
        eprintln!("the traces in ../shared/etl are needed");
        return;
    }
    std::fs::create_dir_all(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("assets")).unwrap();
    let ppt = ppt.to_string_lossy().into_owned();
    let wait = Duration::from_secs(60);

    // 1. a table of on-CPU switches by process, typed into the editor and run
    let mut s = session(&["-E", &ppt, "--tui"]);
    s.wait_for("console", wait, |t| t.contains("Probes"));
    s.send("\x1bOQ"); // F2: the browser, filtered to sched
    s.type_text("sched");
    s.send("\x1b[B\x1b[B"); // down to a probe
    s.send("\x1bOR"); // F3: the editor
    s.type_text("sched:::on-cpu\n{\n@switches[execname] = count();\n}\n");
    s.send(F5);
    s.wait_for("table", wait, |t| t.contains("ended 0"));
    shot(&s, &DARK, "console-table.png");
    s.send("\x11");
    s.wait_exit(Duration::from_secs(5));

    // 2. on-CPU time per process as histograms
    let script = "sched:::on-cpu { self->ts = timestamp; } sched:::off-cpu /self->ts/ { @oncpu_ns[execname] = quantize(timestamp - self->ts); self->ts = 0; }";
    let mut s = session(&["-E", &ppt, "--tui", "-n", script]);
    s.wait_for("histogram", wait, |t| {
        t.contains("distribution") && t.contains("ended 0")
    });
    s.send("\x1bOS"); // F4
    s.send("\x1b[B\x1b[B");
    shot(&s, &DARK, "console-histogram.png");
    s.send("\x11");
    s.wait_exit(Duration::from_secs(5));

    // 3. sampled stacks as a tree
    if net.exists() {
        let net = net.to_string_lossy().into_owned();
        let mut s = session(&[
            "-E",
            &net,
            "--tui",
            "-n",
            "profile:::sample-1ms { @samples[stack()] = count(); }",
        ]);
        s.wait_for("stacks", wait, |t| t.contains("%") && t.contains("ended 0"));
        s.send("\x1bOS");
        shot(&s, &DARK, "console-stacks.png");
        s.send("\x11");
        s.wait_exit(Duration::from_secs(5));
    }

    // 4. the help overlay in the light theme
    let mut s = session(&["-E", &ppt, "--tui", "--theme", "light"]);
    s.wait_for("console", wait, |t| t.contains("Probes"));
    s.send("\x1bOP");
    s.wait_for("help", wait, |t| t.contains("dtx keys"));
    shot(&s, &LIGHT, "console-help-light.png");
    s.send("\x1b");
    s.send("\x11");
    s.wait_exit(Duration::from_secs(5));
}
