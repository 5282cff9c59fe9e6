#include "report/page.h"

#include <fmt/format.h>

#include <filesystem>
#include <map>

#include "common/files.h"
#include "gyre/errors.h"
#include "launcher/command.h"
#include "launcher/process.h"
#include "plot/svg_chart.h"

namespace gyre::report {
namespace {

using plot::escapeXml;

std::string runTable(const std::vector<Run>& runs) {
  std::string t =
      "<table><tr><th>run</th><th>model</th><th>workers</th><th>mode</th><th>batch</th><th>epochs</th>"
      "<th>steps</th><th>final loss</th><th>test accuracy</th><th>samples/s (mean)</th><th>training "
      "s</th></tr>\n";
  for (const Run& r : runs) {
    double sps = 0, seconds = 0;
    for (const Epoch& e : r.epochs) {
      sps += e.samplesPerS;
      seconds += e.seconds;
    }
    const Epoch* last = r.epochs.empty() ? nullptr : &r.epochs.back();
    t += fmt::format(
        "<tr><td style=\"text-align:left\" title=\"{}\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
        escapeXml(r.dir), escapeXml(r.name), escapeXml(r.model), r.world, escapeXml(r.mode), r.batch,
        r.epochs.size(), r.stepNumbers.size(), last ? fmt::format("{:.4f}", last->loss) : "-",
        last && last->testAccuracy ? fmt::format("{:.2f}%", *last->testAccuracy * 100) : "-",
        r.epochs.empty() ? "-" : fmt::format("{:.0f}", sps / static_cast<double>(r.epochs.size())),
        r.epochs.empty() ? "-" : fmt::format("{:.1f}", seconds));
  }
  return t + "</table>\n";
}

// Rasterizes every figure's <svg> through an <img> onto a canvas (what the browser draws), counts
// the pixels that are not near-white, and records the counts and the time on the document.
constexpr const char* kSelfCheck = R"(<script>
window.addEventListener('load', async () => {
  const figures = [...document.querySelectorAll('figure.plot')];
  let rendered = 0;
  for (const f of figures) {
    const svg = f.querySelector('svg');
    let ink = 0;
    if (svg) {
      const w = svg.width.baseVal.value, h = svg.height.baseVal.value;
      const img = new Image();
      img.src = 'data:image/svg+xml;charset=utf-8,' + encodeURIComponent(new XMLSerializer().serializeToString(svg));
      try {
        await img.decode();
        const canvas = document.createElement('canvas');
        canvas.width = w; canvas.height = h;
        const g = canvas.getContext('2d');
        g.drawImage(img, 0, 0);
        const d = g.getImageData(0, 0, w, h).data;
        for (let i = 0; i < d.length; i += 4) if (d[i] < 235 || d[i + 1] < 235 || d[i + 2] < 235) ink++;
      } catch (e) {
        console.error('figure ' + f.id + ' does not draw: ' + e);
      }
    }
    f.dataset.ink = ink;
    if (ink > 0) rendered++;
  }
  const html = document.documentElement;
  html.dataset.figures = figures.length;
  html.dataset.rendered = rendered;
  html.dataset.renderMs = performance.now().toFixed(1);
});
</script>
)";

}  // namespace

// Figures with the same id get -2, -3... appended (the page's anchors and the PNGs' names).
static std::vector<Figure> withUniqueIds(std::vector<Figure> figures) {
  std::map<std::string, int> seen;
  for (Figure& f : figures)
    if (const int n = ++seen[f.id]; n > 1) f.id += fmt::format("-{}", n);
  return figures;
}

std::string page(const std::string& title, const std::vector<Run>& runs, std::vector<Figure> figures) {
  figures = withUniqueIds(std::move(figures));
  std::string html = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{0}</title>\n"
      "<style>body{{font-family:sans-serif;margin:2em;color:#222;max-width:1100px}}"
      "table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:3px "
      "8px;text-align:right}}"
      "th{{background:#f3f3f3}}figure{{margin:2em 0}}figure h2{{font-size:1.1em;margin:0 0 .3em}}"
      "figcaption{{color:#555;max-width:800px}}nav "
      "a{{margin-right:1em}}svg{{max-width:100%;height:auto}}</style>"
      "</head><body>\n<h1>{0}</h1>\n",
      escapeXml(title));
  html += runTable(runs);
  html += "<nav>";
  for (const Figure& f : figures) html += fmt::format("<a href=\"#{}\">{}</a>", f.id, escapeXml(f.title));
  html += "</nav>\n";
  for (const Figure& f : figures)
    html +=
        fmt::format("<figure class=\"plot\" id=\"{}\"><h2>{}</h2>\n{}<figcaption>{}</figcaption></figure>\n",
                    f.id, escapeXml(f.title), f.svg, escapeXml(f.caption));
  if (figures.empty()) html += "<p>No figure: the runs have no records yet.</p>\n";
  return html + kSelfCheck + "</body></html>\n";
}

Written write(const std::string& htmlPath, const std::string& title, const std::vector<Run>& runs,
              const std::vector<Figure>& given, bool png) {
  const std::vector<Figure> figures = withUniqueIds(given);  // the page's ids name the PNGs
  Written w;
  w.html = htmlPath;
  files::writeAtomically(htmlPath, page(title, runs, figures));
  if (!png || figures.empty()) return w;
  if (launcher::findExecutable("rsvg-convert").empty()) {
    w.pngNote = "no PNGs: rsvg-convert is not installed (Debian's librsvg2-bin)";
    return w;
  }
  std::string stem = htmlPath;
  if (stem.size() > 5 && stem.ends_with(".html")) stem.resize(stem.size() - 5);
  for (const Figure& f : figures) {
    const std::string svgPath = stem + "-" + f.id + ".svg", pngPath = stem + "-" + f.id + ".png";
    files::writeAtomically(svgPath, f.svg);
    const launcher::CommandResult r =
        launcher::runCommand({"rsvg-convert", "--format", "png", "--output", pngPath, svgPath}, [] {
          launcher::CommandOptions o;
          o.timeout = std::chrono::seconds(30);
          return o;
        }());
    std::filesystem::remove(svgPath);
    if (!r.ok())
      throw SystemError("rsvg-convert could not write " + pngPath + ": " + r.error + " " + r.output);
    w.pngs.push_back(pngPath);
  }
  return w;
}

}  // namespace gyre::report
