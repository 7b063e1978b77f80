// `recipe runs envelope`: the least-squares memory line, means over the steps after the warm-up,
// the tables (rows: first axis, columns: the rest), skipped and failed points with their reasons,
// and the chart laid out by the shared plot code.
#include <doctest/doctest.h>

#include <filesystem>

#include "runs/envelope.hpp"
#include "runs/plot_svg.hpp"
#include "runs/sweep_record.hpp"
#include "tests/executors/exec_test_util.hpp"

TEST_SUITE_BEGIN("runs");

using namespace recipe::exec;
using namespace recipe::exec::testing;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// A finished point: timing.jsonl with `steps` rows; the warm-up rows are slow and small, the rest
// run at `tps` tokens/s with peak memory 5 GiB + 1.5 KiB per token of mb·seq.
void write_point(const std::filesystem::path& root, const std::string& name, int mb, int seq, double tps, int steps,
                 const std::string& state = "completed") {
  const auto dir = root / name;
  const double peak = 5 * kGiB + 1.5 * 1024 * mb * seq;
  std::string timing;
  for (int s = 1; s <= steps; ++s) {
    const bool warm = s <= 2;
    timing += "{\"step\":" + std::to_string(s) + ",\"step_ms\":" + std::to_string(warm ? 1000.0 : 50.0) +
              ",\"tokens_per_sec\":" + std::to_string(warm ? 1.0 : tps) +
              ",\"tflops\":1,\"mfu\":" + (warm ? std::string("0.01") : std::string("0.25")) +
              ",\"peak_memory_bytes\":" + std::to_string(static_cast<long long>(warm ? peak / 2 : peak)) + "}\n";
  }
  write_text(dir / "timing.jsonl", timing);
  write_text(dir / "resolved.toml", "[trainer]\nmicro_batch_size = " + std::to_string(mb) +
                                        "\n[model]\nseq_length = " + std::to_string(seq) + "\n");
  write_text(dir / "status.json", "{\"state\": \"" + state + "\", \"steps\": " + std::to_string(steps) +
                                      ", \"message\": \"" + (state == "failed" ? "CUDA out of memory" : "") + "\"}\n");
}

}  // namespace

TEST_CASE("envelope: the memory line is the least-squares fit") {
  const auto line = fit_memory_line({{1024, 5 * kGiB + 1.5 * 1024 * 1024},
                                     {4096, 5 * kGiB + 1.5 * 1024 * 4096},
                                     {8192, 5 * kGiB + 1.5 * 1024 * 8192}});
  REQUIRE(line);
  CHECK(line->per_token_bytes == doctest::Approx(1.5 * 1024));
  CHECK(line->intercept_bytes == doctest::Approx(5 * kGiB));
  CHECK(line->points == 3);
  CHECK_FALSE(fit_memory_line({{1024, 1.0}}));
  CHECK_FALSE(fit_memory_line({{1024, 1.0}, {1024, 2.0}}));  // no spread in x: no slope
  // Noisy points: the fit passes through the mean.
  const auto noisy = fit_memory_line({{1, 1}, {2, 3}, {3, 2}});
  REQUIRE(noisy);
  CHECK(noisy->per_token_bytes == doctest::Approx(0.5));
  CHECK(noisy->intercept_bytes == doctest::Approx(1.0));
}

TEST_CASE("envelope: tables by micro batch and sequence, warm-up left out, skipped and failed points named") {
  TempDir tmp;
  const auto root = tmp.path() / "sweep1";
  SweepRecord rec;
  rec.recipe = "gpt3_345m";
  rec.axes = {"trainer.micro_batch_size", "model.seq_length"};
  rec.points = {{"mb2-seq1024", {{"trainer.micro_batch_size", "2"}, {"model.seq_length", "1024"}}, ""},
                {"mb2-seq2048", {{"trainer.micro_batch_size", "2"}, {"model.seq_length", "2048"}}, ""},
                {"mb4-seq1024", {{"trainer.micro_batch_size", "4"}, {"model.seq_length", "1024"}}, ""},
                {"mb4-seq2048",
                 {{"trainer.micro_batch_size", "4"}, {"model.seq_length", "2048"}},
                 "predicted 93.1 GiB per rank > 79.6 GiB on H100-80GB"},
                {"mb8-seq1024", {{"trainer.micro_batch_size", "8"}, {"model.seq_length", "1024"}}, ""}};
  write_sweep_record(root.string(), rec);
  const auto back = read_sweep_record(root.string());
  REQUIRE(back);
  CHECK(back->points.size() == 5);
  CHECK(back->points[1].settings[1].first == "model.seq_length");  // axis order survives
  CHECK(back->points[3].skipped.find("93.1 GiB") != std::string::npos);

  write_point(root, "mb2-seq1024", 2, 1024, 1000, 8);
  write_point(root, "mb2-seq2048", 2, 2048, 1500, 8);
  write_point(root, "mb4-seq1024", 4, 1024, 1600, 8);
  write_point(root, "mb8-seq1024", 8, 1024, 0, 3, "failed");

  const Envelope env = read_envelope(root.string(), 2);
  REQUIRE(env.points.size() == 5);
  const EnvelopePoint& p = env.points[0];
  CHECK(p.tokens_per_step == 2048);
  CHECK(p.steps == 8);
  CHECK(p.steps_measured == 6);
  CHECK(*p.tokens_per_sec == doctest::Approx(1000));  // the two slow warm-up steps are not in the mean
  CHECK(*p.step_ms == doctest::Approx(50));
  CHECK(*p.mfu == doctest::Approx(0.25));
  CHECK(*p.peak_memory_bytes == doctest::Approx(5 * kGiB + 1.5 * 1024 * 2048));
  CHECK(env.points[3].state == "skipped");
  CHECK(env.points[4].state == "failed");
  REQUIRE(env.memory_line);
  CHECK(env.memory_line->points == 3);  // the completed points only
  CHECK(env.memory_line->per_token_bytes == doctest::Approx(1.5 * 1024));

  const std::string report = format_envelope(env);
  CAPTURE(report);
  CHECK(report.find("tokens/s\n") != std::string::npos);
  CHECK(report.find("seq1024") != std::string::npos);
  CHECK(report.find("mb2") < report.find("mb4"));
  CHECK(report.find("too big") != std::string::npos);
  CHECK(report.find("mb4-seq2048: not launched, predicted 93.1 GiB per rank > 79.6 GiB on H100-80GB") !=
        std::string::npos);
  CHECK(report.find("mb8-seq1024: failed, CUDA out of memory") != std::string::npos);
  CHECK(report.find("peak memory ≈ 1.50 KiB per token per step + 5.00 GiB") != std::string::npos);
  CHECK(report.find("25.0") != std::string::npos);  // MFU in percent

  // Warm-up longer than a point's steps: no mean, and the report says why.
  const Envelope all_warm = read_envelope(root.string(), 10);
  CHECK_FALSE(all_warm.points[0].tokens_per_sec);
  CHECK(format_envelope(all_warm).find("none after the 10 warm-up steps") != std::string::npos);

  // The chart: throughput and memory panels over tokens per step, a series per column plus the fit.
  const PlotLayout l = layout_envelope_plot(env);
  REQUIRE(l.panels.size() == 2);
  const std::string svg = render_plot_svg(l);
  CHECK(svg.find("peak memory (GiB)") != std::string::npos);
  CHECK(svg.find("throughput (tokens/s)") != std::string::npos);
  CHECK(svg.find("fit: 1.50 KiB/token + 5.00 GiB") != std::string::npos);
  CHECK(svg.find("seq2048") != std::string::npos);

  CHECK_THROWS(read_envelope((tmp.path() / "nothing").string(), 5));
}

TEST_SUITE_END();
