#include "sim/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace gpupack::sim {
namespace {

nlohmann::json StatJson(const Stat& s) {
  auto round4 = [](double v) { return std::round(v * 10000.0) / 10000.0; };
  return {{"median", round4(s.median)}, {"mean", round4(s.mean)}, {"sd", round4(s.sd)}};
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

const AggregatePoint* PointAt(const PolicyRun& run, int x) {
  if (x < 0 || x >= static_cast<int>(run.curve.size())) return nullptr;
  return &run.curve[x];
}

// Linear-interpolated quantile of the seeds' values at x.
double Quantile(const PolicyRun& run, int x, double q) {
  std::vector<double> v;
  for (const auto& s : run.seeds) {
    if (x < static_cast<int>(s.curve.size())) v.push_back(s.curve[x].unallocated_pct);
  }
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

const char* kColors[] = {"#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd",
                         "#8c564b", "#e377c2", "#7f7f7f", "#17becf"};

}  // namespace

nlohmann::json RunJson(const PolicyRun& run) {
  nlohmann::json seeds = nlohmann::json::array();
  nlohmann::json failed = nlohmann::json::array();
  for (const auto& s : run.seeds) {
    seeds.push_back(s.seed);
    failed.push_back(s.failed);
  }
  nlohmann::json curve = nlohmann::json::array();
  for (const auto& p : run.curve) {
    curve.push_back({{"arrivedPct", p.arrived_pct},
                     {"unallocatedGpuPct", StatJson(p.unallocated_pct)},
                     {"fragRatePct", StatJson(p.frag_rate_pct)}});
  }
  return {{"policy", run.policy}, {"seeds", seeds}, {"pods", run.seeds.empty() ? 0 : run.seeds.front().pods},
          {"failedPods", failed}, {"curve", curve}, {"seconds", std::round(run.seconds * 1000.0) / 1000.0}};
}

std::string FormatTable(const std::vector<PolicyRun>& runs, bool compute) {
  static const int kLevels[] = {80, 90, 95, 100, 110, 120, 130};
  std::ostringstream out;
  out << "unallocated GPU % (median over seeds) at arrived workload % of GPU capacity\n";
  char line[512];
  std::snprintf(line, sizeof(line), "%-22s", "policy");
  out << line;
  for (int x : kLevels) {
    std::snprintf(line, sizeof(line), " %7d", x);
    out << line;
  }
  out << "   @100 mean±sd   failed  s/seed\n";
  for (const auto& run : runs) {
    std::snprintf(line, sizeof(line), "%-22s", run.policy.c_str());
    out << line;
    for (int x : kLevels) {
      const AggregatePoint* p = PointAt(run, x);
      std::snprintf(line, sizeof(line), " %7s", p ? Fixed(p->unallocated_pct.median, 2).c_str() : "-");
      out << line;
    }
    const AggregatePoint* p = PointAt(run, 100);
    std::string at100 = p ? Fixed(p->unallocated_pct.mean, 2) + "±" + Fixed(p->unallocated_pct.sd, 2) : "-";
    double failed = 0;
    for (const auto& s : run.seeds) failed += s.failed;
    const double n = run.seeds.empty() ? 1.0 : static_cast<double>(run.seeds.size());
    std::snprintf(line, sizeof(line), "   %-13s %7.0f %7.2f\n", at100.c_str(), failed / n, run.seconds / n);
    out << line;
  }
  if (!compute) return out.str();
  out << "\nat arrived 100 %: unallocated memory % and unallocated compute % (median, mean±sd over seeds)\n";
  std::snprintf(line, sizeof(line), "%-22s %8s %13s %8s %13s\n", "policy", "memory", "mean±sd", "compute", "mean±sd");
  out << line;
  for (const auto& run : runs) {
    const AggregatePoint* p = PointAt(run, 100);
    auto cell = [&](const Stat& s) { return Fixed(s.mean, 2) + "±" + Fixed(s.sd, 2); };
    std::snprintf(line, sizeof(line), "%-22s %8s %13s %8s %13s\n", run.policy.c_str(),
                  p ? Fixed(p->unallocated_pct.median, 2).c_str() : "-", p ? cell(p->unallocated_pct).c_str() : "-",
                  p ? Fixed(p->unallocated_compute_pct.median, 2).c_str() : "-",
                  p ? cell(p->unallocated_compute_pct).c_str() : "-");
    out << line;
  }
  return out.str();
}

std::string SvgChart(const std::vector<PolicyRun>& runs, const std::string& title) {
  const double width = 760, height = 440, left = 60, right = 170, top = 40, bottom = 50;
  int max_x = 0;
  double max_y = 5;
  for (const auto& r : runs) {
    max_x = std::max(max_x, static_cast<int>(r.curve.size()) - 1);
    for (const auto& p : r.curve) {
      if (p.arrived_pct >= 75) max_y = std::max(max_y, Quantile(r, p.arrived_pct, 0.75));
    }
  }
  // Like Fig. 9(a): the interesting part is where the cluster fills, from 75 % arrived on.
  const int x0 = std::min(75, std::max(0, max_x - 1));
  const int x1 = std::max(x0 + 1, max_x);
  max_y = std::ceil(std::min(100.0, max_y * 1.1) / 5.0) * 5.0;
  auto px = [&](double x) { return left + (x - x0) / (x1 - x0) * (width - left - right); };
  auto py = [&](double y) { return top + (1.0 - y / max_y) * (height - top - bottom); };
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << width << " " << height << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg << "<text x=\"" << width / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">" << Escape(title)
      << "</text>\n";
  for (int i = 0; i <= 5; ++i) {
    const double y = max_y * i / 5.0;
    svg << "<line x1=\"" << left << "\" x2=\"" << width - right << "\" y1=\"" << py(y) << "\" y2=\"" << py(y)
        << "\" stroke=\"#ddd\"/><text x=\"" << left - 6 << "\" y=\"" << py(y) + 4 << "\" text-anchor=\"end\">"
        << Fixed(y, 1) << "</text>\n";
  }
  for (int x = x0; x <= x1; ++x) {
    if (x % 10 != 0) continue;
    svg << "<line x1=\"" << px(x) << "\" x2=\"" << px(x) << "\" y1=\"" << top << "\" y2=\"" << height - bottom
        << "\" stroke=\"#eee\"/><text x=\"" << px(x) << "\" y=\"" << height - bottom + 16
        << "\" text-anchor=\"middle\">" << x << "</text>\n";
  }
  svg << "<text x=\"" << (left + width - right) / 2 << "\" y=\"" << height - 12
      << "\" text-anchor=\"middle\">arrived workload (% of cluster GPU capacity)</text>\n";
  svg << "<text transform=\"translate(16," << (top + height - bottom) / 2
      << ") rotate(-90)\" text-anchor=\"middle\">unallocated GPU (%)</text>\n";
  // The ideal line: everything that arrived is allocated until the cluster is full.
  svg << "<polyline fill=\"none\" stroke=\"#000\" stroke-dasharray=\"4 3\" points=\"";
  for (int x = x0; x <= std::min(x1, 100); ++x) {
    if (100 - x <= max_y) svg << px(x) << "," << py(100 - x) << " ";
  }
  svg << px(std::max(x0, std::min(x1, 100))) << "," << py(0) << " " << px(x1) << "," << py(0) << "\"/>\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const PolicyRun& r = runs[i];
    const char* color = kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
    std::ostringstream band, line;
    std::vector<std::pair<double, double>> upper, lower;
    for (const auto& p : r.curve) {
      if (p.arrived_pct < x0) continue;
      const double med = std::min(max_y, p.unallocated_pct.median);
      line << px(p.arrived_pct) << "," << py(med) << " ";
      upper.emplace_back(px(p.arrived_pct), py(std::min(max_y, Quantile(r, p.arrived_pct, 0.75))));
      lower.emplace_back(px(p.arrived_pct), py(std::min(max_y, Quantile(r, p.arrived_pct, 0.25))));
    }
    for (const auto& [x, y] : upper) band << x << "," << y << " ";
    for (auto it = lower.rbegin(); it != lower.rend(); ++it) band << it->first << "," << it->second << " ";
    svg << "<polygon fill=\"" << color << "\" fill-opacity=\"0.15\" stroke=\"none\" points=\"" << band.str()
        << "\"/>\n";
    svg << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\" points=\"" << line.str() << "\"/>\n";
    const double ly = top + 10 + 18 * static_cast<double>(i);
    const AggregatePoint* at100 = PointAt(r, 100);
    svg << "<line x1=\"" << width - right + 10 << "\" x2=\"" << width - right + 30 << "\" y1=\"" << ly << "\" y2=\""
        << ly << "\" stroke=\"" << color << "\" stroke-width=\"3\"/><text x=\"" << width - right + 35 << "\" y=\""
        << ly + 4 << "\">" << Escape(r.policy);
    if (at100 != nullptr) svg << ' ' << Fixed(at100->unallocated_pct.median, 2) << '%';
    svg << "</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

std::string HtmlReport(const std::vector<PolicyRun>& runs, const std::string& title) {
  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" << Escape(title)
       << "</title>\n<style>body{font-family:sans-serif;margin:2em}pre{background:#f6f6f6;padding:1em}</style>"
       << "</head><body>\n<h1>" << Escape(title) << "</h1>\n"
       << "<p>Unallocated GPU % against arrived workload (median over seeds, band: 25–75 % of seeds). "
       << "Lower is better; the dashed line is the ideal (everything that arrived is allocated).</p>\n"
       << SvgChart(runs, title) << "<pre>" << Escape(FormatTable(runs)) << "</pre>\n</body></html>\n";
  return html.str();
}

}  // namespace gpupack::sim
