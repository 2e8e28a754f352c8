//! `cuda-flux html`: one self-contained HTML page for profiles: per kernel an instruction-mix
//! chart (inline SVG), the metric groups and the annotated hot blocks. Everything is inline (CSS,
//! SVG, no script, no fonts, no network) so the file can be mailed or archived and opens
//! anywhere, including offline.

use std::fmt::Write as _;

use crate::aggregate::{Kernel, Summary};
use crate::annotate::{self, Listing};
use crate::features;
use crate::metrics::{simd_efficiency, Metric, Metrics, Value};

/// How much to show.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Hottest blocks shown per kernel (and architecture).
    pub hot_blocks: usize,
}

/// Escapes text for HTML element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "
body { font-family: sans-serif; margin: 2em; color: #222; background: #fff; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 2px solid #4a7; }
h3 { font-size: 1.05em; }
.meta { color: #555; font-family: monospace; }
table { border-collapse: collapse; margin: 0.5em 0; }
td, th { padding: 2px 8px; border-bottom: 1px solid #ddd; text-align: right; font-size: 0.9em; }
th { background: #eef5f0; } td.name, th.name { text-align: left; font-family: monospace; }
pre { background: #f6f8fa; padding: 0.5em; overflow-x: auto; font-size: 0.85em; }
.hot { color: #b30; font-weight: bold; }
svg text { font-family: sans-serif; font-size: 12px; }
";

/// The page for `kernels` of `summary`.
pub fn render(summary: &Summary, kernels: &[&Kernel], options: Options) -> String {
    let mut out = String::new();
    let files = summary.file_names();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>cuda-flux report</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <h1>cuda-flux report</h1>\n<p class=\"meta\">{} kernel(s) from {}</p>\n",
        kernels.len(),
        escape(&files.join(", "))
    );
    if kernels.len() > 1 {
        out.push_str("<ul>\n");
        for (i, k) in kernels.iter().enumerate() {
            let _ = writeln!(
                out,
                "<li><a href=\"#kernel-{i}\">{}</a></li>",
                escape(k.title())
            );
        }
        out.push_str("</ul>\n");
    }
    for (i, kernel) in kernels.iter().enumerate() {
        render_kernel(&mut out, i, kernel, options);
    }
    out.push_str("</body>\n</html>\n");
    out
}

fn render_kernel(out: &mut String, i: usize, k: &Kernel, options: Options) {
    let archs: Vec<String> = k.archs.iter().map(|a| format!("sm_{a}")).collect();
    let _ = write!(
        out,
        "<section class=\"kernel\" id=\"kernel-{i}\">\n<h2>{}</h2>\n\
         <p class=\"meta\">{} &middot; {} &middot; {} &middot; launches: {} ({} counted)</p>\n",
        escape(k.title()),
        escape(&k.name),
        escape(if k.source.is_empty() { "?" } else { &k.source }),
        archs.join(", "),
        k.launches,
        k.counted
    );
    for entry in &k.entries {
        if let Some(reason) = &entry.head.reason {
            let _ = writeln!(
                out,
                "<p>Not instrumented for sm_{}: {}</p>",
                entry.head.arch,
                escape(reason)
            );
        }
    }
    if k.counted == 0 {
        out.push_str("<p>No counted launches.</p>\n</section>\n");
        return;
    }
    let metrics = Metrics::of(&k.totals);
    let threads = metrics.count(Metric::ThreadInstExecuted);
    let warps = metrics.count(Metric::InstExecuted);
    let simd = simd_efficiency(threads, warps).map_or("-".to_string(), |p| format!("{p:.2}%"));
    let _ = writeln!(
        out,
        "<p>Instructions: {threads} thread, {warps} warp; SIMD efficiency {simd}.</p>"
    );
    out.push_str("<h3>Instruction mix (thread instructions)</h3>\n");
    out.push_str(&mix_chart(&features::mix(&k.totals)));
    render_metrics(out, &metrics);
    for listing in annotate::listings(k, options.hot_blocks) {
        render_hot_blocks(out, &listing, options.hot_blocks);
    }
    out.push_str("</section>\n");
}

/// A horizontal bar chart of the non-zero classes, as inline SVG.
pub fn mix_chart(mix: &[(String, u128)]) -> String {
    let shown: Vec<&(String, u128)> = mix.iter().filter(|(_, n)| *n > 0).collect();
    let total: u128 = shown.iter().map(|(_, n)| n).sum();
    let max = shown.iter().map(|(_, n)| *n).max().unwrap_or(0).max(1);
    let (label_w, bar_w, row_h) = (140.0, 480.0, 22.0);
    let height = row_h * shown.len() as f64 + 10.0;
    let mut svg = format!(
        "<svg class=\"mix\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" \
         role=\"img\" aria-label=\"instruction mix\">\n",
        label_w + bar_w + 160.0
    );
    for (row, (name, n)) in shown.iter().enumerate() {
        let y = 5.0 + row_h * row as f64;
        let w = (bar_w * *n as f64 / max as f64).max(1.0);
        let share = 100.0 * *n as f64 / total.max(1) as f64;
        // Memory classes in one colour, compute classes in another.
        let colour = if name.starts_with("mem_") {
            "#3a7bd5"
        } else {
            "#44aa77"
        };
        let _ = writeln!(
            svg,
            "<text x=\"0\" y=\"{:.0}\">{}</text>\
             <rect class=\"bar\" x=\"{label_w}\" y=\"{y:.0}\" width=\"{w:.1}\" height=\"{:.0}\" fill=\"{colour}\">\
             <title>{}: {n}</title></rect>\
             <text x=\"{:.1}\" y=\"{:.0}\">{n} ({share:.1}%)</text>",
            y + 15.0,
            escape(name),
            row_h - 6.0,
            escape(name),
            label_w + w + 6.0,
            y + 15.0,
        );
    }
    svg.push_str("</svg>\n");
    svg
}

fn render_metrics(out: &mut String, metrics: &Metrics) {
    out.push_str("<h3>Metric groups</h3>\n<table class=\"metrics\">\n<tr><th class=\"name\">metric</th><th>value</th></tr>\n");
    for (name, value) in metrics.iter() {
        let shown = match value {
            Value::Count(0) => continue,
            Value::Count(n) => n.to_string(),
            other => match other.as_f64() {
                Some(v) => format!("{v:.2}"),
                None => continue,
            },
        };
        let _ = writeln!(
            out,
            "<tr><td class=\"name\">{name}</td><td>{shown}</td></tr>"
        );
    }
    out.push_str("</table>\n");
}

fn render_hot_blocks(out: &mut String, listing: &Listing<'_>, hot: usize) {
    let mut ranked: Vec<(usize, usize)> = listing
        .rank
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.map(|r| (r, i)))
        .collect();
    ranked.sort_unstable();
    let _ = writeln!(
        out,
        "<h3>Hottest blocks, sm_{} (top {hot} by threads)</h3>",
        listing.arch
    );
    for (rank, index) in ranked {
        let block = &listing.blocks[index];
        let c = listing.counts[index];
        let simd =
            simd_efficiency(c.threads, c.warps).map_or("-".to_string(), |p| format!("{p:.0}%"));
        let _ = writeln!(
            out,
            "<div class=\"block\" data-block=\"{index}\" data-threads=\"{}\" data-warps=\"{}\">\
             <p><span class=\"hot\">#{rank}</span> block {index} <code>{}</code> / <code>{}</code>: \
             {} threads, {} warps, SIMD {simd}</p>",
            c.threads,
            c.warps,
            escape(&block.function),
            escape(annotate::label(listing.blocks, index)),
            c.threads,
            c.warps
        );
        out.push_str("<pre>");
        for text in annotate::instruction_texts(block) {
            let _ = writeln!(out, "{:>14} {:>10}  {}", c.threads, c.warps, escape(text));
        }
        out.push_str("</pre></div>\n");
    }
    if listing.has_lines() {
        let lines = annotate::by_line(listing);
        let _ = writeln!(
            out,
            "<h3>Source lines, sm_{}</h3>\n<table class=\"lines\">\n<tr><th class=\"name\">file:line</th>\
             <th>threads</th><th>warps</th><th>instructions</th></tr>",
            listing.arch
        );
        for ((file, line), c) in lines {
            let _ = writeln!(
                out,
                "<tr><td class=\"name\">{}:{line}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&file),
                c.threads,
                c.warps,
                c.instructions
            );
        }
        out.push_str("</table>\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            escape("a<b> & \"c\" 'd'"),
            "a&lt;b&gt; &amp; &quot;c&quot; &#39;d&#39;"
        );
    }

    #[test]
    fn the_chart_has_one_bar_per_non_zero_class() {
        let svg = mix_chart(&[
            ("arithmetic".into(), 30),
            ("logic".into(), 0),
            ("mem_global".into(), 10),
        ]);
        assert_eq!(svg.matches("<rect").count(), 2);
        assert!(
            svg.contains("30 (75.0%)") && svg.contains("10 (25.0%)"),
            "{svg}"
        );
        assert!(mix_chart(&[]).starts_with("<svg"));
    }
}
