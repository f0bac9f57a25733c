//! The SVG plot of `bench deploy`'s 4-bit section: decode tok/s against context
//! (log scales, 1k to 128k), per model one colour: skillc's plan modeled (solid),
//! the published plan modeled (dashed), the published sweep measured (dots).
//! Written by hand, deterministic: no timestamps, numbers at fixed precision.

use std::fmt::Write;

use super::packed::{Comparison, CONTEXTS};

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 480.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 230.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;
const COLOURS: [&str; 4] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];
/// tok/s ticks on the y axis (log scale).
const TICKS: [f64; 8] = [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0];

struct Axes {
    x: (f64, f64),
    y: (f64, f64),
}

impl Axes {
    fn x(&self, context: usize) -> f64 {
        let t = ((context as f64).ln() - self.x.0) / (self.x.1 - self.x.0);
        LEFT + t * (WIDTH - LEFT - RIGHT)
    }

    fn y(&self, tok_s: f64) -> f64 {
        let t = (tok_s.ln() - self.y.0) / (self.y.1 - self.y.0);
        HEIGHT - BOTTOM - t * (HEIGHT - TOP - BOTTOM)
    }
}

/// The plot of every comparison's curves.
pub fn plot(comparisons: &[Comparison]) -> String {
    let speeds = comparisons.iter().flat_map(|c| {
        c.curve
            .iter()
            .flat_map(|(_, a, b)| [1.0 / a, 1.0 / b])
            .chain(c.measured.values().map(|s| 1.0 / s))
    });
    let (lo, hi) = speeds.fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    let (lo, hi) = if lo.is_finite() && hi > 0.0 {
        (lo * 0.8, hi * 1.25)
    } else {
        (1.0, 100.0)
    };
    let first = CONTEXTS[0] as f64;
    let last = CONTEXTS[CONTEXTS.len() - 1] as f64;
    let axes = Axes {
        x: (first.ln(), last.ln()),
        y: (lo.ln(), hi.ln()),
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        s,
        r#"<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#
    );
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="22" font-size="14">Decode tok/s against context: 4-bit deployments (modeled lines, measured dots)</text>"#
    );
    grid(&mut s, &axes, (lo, hi));
    for (i, c) in comparisons.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        for (dash, pick) in [("", 0usize), (r#" stroke-dasharray="6 4""#, 1)] {
            let points: Vec<String> = c
                .curve
                .iter()
                .map(|(ctx, ours, published)| {
                    let v = if pick == 0 { *ours } else { *published };
                    format!("{:.1},{:.1}", axes.x(*ctx), axes.y(1.0 / v))
                })
                .collect();
            let _ = writeln!(
                s,
                r#"<polyline fill="none" stroke="{colour}" stroke-width="2"{dash} points="{}"/>"#,
                points.join(" ")
            );
        }
        for (ctx, seconds) in &c.measured {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="4" fill="{colour}"/>"#,
                axes.x(*ctx),
                axes.y(1.0 / seconds)
            );
        }
        let ly = TOP + 20.0 + 20.0 * i as f64;
        let lx = WIDTH - RIGHT + 20.0;
        let _ = writeln!(
            s,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{colour}" stroke-width="2"/><text x="{}" y="{}">{} {}</text>"#,
            lx + 24.0,
            lx + 30.0,
            ly + 4.0,
            c.model,
            c.format
        );
    }
    let ly = TOP + 30.0 + 20.0 * comparisons.len() as f64;
    let lx = WIDTH - RIGHT + 20.0;
    for (i, text) in [
        "solid: skillc's plan (modeled)",
        "dashed: published plan (modeled)",
        "dots: published sweep (measured)",
    ]
    .iter()
    .enumerate()
    {
        let _ = writeln!(
            s,
            r##"<text x="{lx}" y="{:.1}" fill="#444">{text}</text>"##,
            ly + 18.0 * i as f64
        );
    }
    s.push_str("</svg>\n");
    s
}

fn grid(s: &mut String, axes: &Axes, (lo, hi): (f64, f64)) {
    let (x0, x1) = (LEFT, WIDTH - RIGHT);
    let (y0, y1) = (TOP, HEIGHT - BOTTOM);
    let _ = writeln!(
        s,
        r##"<rect x="{x0}" y="{y0}" width="{}" height="{}" fill="none" stroke="#888"/>"##,
        x1 - x0,
        y1 - y0
    );
    for ctx in CONTEXTS {
        let x = axes.x(ctx);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{y0}" x2="{x:.1}" y2="{y1}" stroke="#eee"/><text x="{x:.1}" y="{}" text-anchor="middle">{}k</text>"##,
            y1 + 16.0,
            ctx / 1024
        );
    }
    for tick in TICKS.iter().filter(|t| **t >= lo && **t <= hi) {
        let y = axes.y(*tick);
        let _ = writeln!(
            s,
            r##"<line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" text-anchor="end">{tick}</text>"##,
            x0 - 6.0,
            y + 4.0
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{}" text-anchor="middle">context (tokens, log scale)</text>"#,
        (x0 + x1) / 2.0,
        HEIGHT - 20.0
    );
    let _ = writeln!(
        s,
        r#"<text x="18" y="{:.1}" transform="rotate(-90 18 {:.1})" text-anchor="middle">decode tok/s (log scale)</text>"#,
        (y0 + y1) / 2.0,
        (y0 + y1) / 2.0
    );
}
