// `gyre report`'s output: one self-contained HTML page (the figures inline as SVG, a table of the
// runs, no file or network fetched) and, beside it, each figure as a PNG for slides and documents.
// The page checks itself when a browser opens it: it rasterizes each figure's SVG onto a canvas,
// counts the pixels that are not background, and records on <html> how many figures it has
// (data-figures), how many drew something (data-rendered) and how long that took from the start
// of navigation (data-render-ms); each <figure> gets data-ink. Headless Chromium's --dump-dom
// reads them back (tests/process/report_browser_test.cc).
#pragma once

#include <string>
#include <vector>

#include "report/figures.h"
#include "report/run_data.h"

namespace gyre::report {

// The page. `title` heads it; figures with the same id get -2, -3... appended.
std::string page(const std::string& title, const std::vector<Run>& runs, std::vector<Figure> figures);

struct Written {
  std::string html;
  std::vector<std::string> pngs;
  std::string pngNote;  // why no PNG was written, when none was
};

// Writes `htmlPath` and, with `png`, OUT-ID.png beside it for each figure (OUT: htmlPath without
// .html), rasterized by rsvg-convert (Debian's librsvg2-bin). Without rsvg-convert, no PNG is
// written and pngNote says why. Throws SystemError when a file cannot be written or
// rsvg-convert fails.
Written write(const std::string& htmlPath, const std::string& title, const std::vector<Run>& runs,
              const std::vector<Figure>& figures, bool png);

}  // namespace gyre::report
