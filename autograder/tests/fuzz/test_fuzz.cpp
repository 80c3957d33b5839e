// The judge that nothing can crash (autograder/SECURITY.md): each attack on the result
// descriptor named in the threat model costs its case a status that says what was wrong, and a
// bounded fuzz run (the seed corpus of real results in corpus/, and deterministic mutations of
// them) drives the same entry point libFuzzer does. A throw out of it fails the test; a crash
// ends the program, which fails it too.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "fuzz_result.hpp"
#include "pipeline/result_parse.hpp"
#include "util.hpp"

using namespace mgpu::grade;
using namespace mgpu::grade::fuzz;
namespace fs = std::filesystem;

namespace {

const fs::path kDir = MGPU_FUZZ_DIR;

std::string reference_case() { return read_text(kDir / "reference" / "case.json"); }

// Every seed: the corpus and the two references, in a fixed order.
std::vector<std::string> seeds() {
  std::vector<fs::path> files;
  for (const char* sub : {"corpus", "reference"})
    for (const auto& e : fs::directory_iterator(kDir / sub)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<std::string> out;
  for (const auto& f : files) out.push_back(read_text(f));
  return out;
}

// Pieces that make a mutation reach the parser's and the judge's corners.
const std::vector<std::string> kTokens = {"[",
                                          "]",
                                          "{",
                                          "}",
                                          "\"",
                                          ",",
                                          ":",
                                          "null",
                                          "true",
                                          "1e999",
                                          "-0",
                                          "\"nan\"",
                                          "\"inf\"",
                                          "\"-inf\"",
                                          "\xff",
                                          "\xc3",
                                          "\xed\xa0\x80",
                                          "\\u0000",
                                          "\\ud800",
                                          "{\"data\":{}}",
                                          "\"message\":5",
                                          "\"status\":[]",
                                          "\"values\":[]",
                                          "\"measures\":{\"messages_per_rank\":\"x\"}",
                                          "[[[[[[[[[[[[[[[[[[",
                                          "\"dtype\":1",
                                          "\"index\":\"rank\"",
                                          "18446744073709551616"};

// One deterministic mutation of s (rng decides which), sometimes splicing another seed in.
std::string mutate(std::string s, std::mt19937_64& rng, const std::vector<std::string>& all) {
  auto pick = [&](std::size_t n) { return n ? static_cast<std::size_t>(rng() % n) : 0; };
  const int steps = 1 + static_cast<int>(rng() % 4);
  for (int k = 0; k < steps; ++k) {
    const std::size_t at = pick(s.size() + 1);
    switch (rng() % 7) {
      case 0:  // a byte replaced
        if (!s.empty()) s[pick(s.size())] = static_cast<char>(rng());
        break;
      case 1:  // a range erased
        s.erase(at, pick(64) + 1);
        break;
      case 2:  // a token inserted
        s.insert(at, kTokens[pick(kTokens.size())]);
        break;
      case 3:  // cut short
        s.resize(at);
        break;
      case 4: {  // spliced with another seed
        const std::string& o = all[pick(all.size())];
        s = s.substr(0, at) + o.substr(pick(o.size() + 1));
        break;
      }
      case 5:  // a range repeated
        if (!s.empty()) {
          const std::size_t from = pick(s.size()),
                            n = std::min<std::size_t>(pick(256) + 1, s.size() - from);
          s.insert(at, s.substr(from, n));
        }
        break;
      default: {  // a digit changed, so numbers move across tolerances and budgets
        const std::size_t d = s.find_first_of("0123456789", at);
        if (d != std::string::npos) s[d] = static_cast<char>('0' + rng() % 10);
      }
    }
  }
  return s;
}

std::string fmt_hex(unsigned char c) {
  const char* d = "0123456789abcdef";
  return std::string("\\x") + d[c >> 4] + d[c & 15];
}

// The start of an input, printable, for the message of a failure.
std::string escaped_prefix(const std::string& s) {
  std::string out;
  for (unsigned char c : s.substr(0, 300))
    out += c >= 0x20 && c < 0x7f ? std::string(1, static_cast<char>(c)) : fmt_hex(c);
  return out;
}

}  // namespace

TEST_CASE("fuzz: a real result is read and judged as the reference it is") {
  REQUIRE(fixture_ready());
  Judged j = judge_bytes(reference_case());
  CHECK(j.run.status == Status::passed);
  CHECK(j.as_case.status == Status::passed);
  CHECK(j.as_case.score == j.as_case.max_score);
}

TEST_CASE("fuzz: a value nested two million deep costs the case, not the grader's stack") {
  for (const std::string& deep :
       {std::string(2'000'000, '['),
        "{\"status\":\"ok\",\"values\":{\"sum\":{\"data\":" + std::string(2'000'000, '[')}) {
    Judged j = judge_bytes(deep);
    CHECK(j.as_case.status == Status::no_result);
    CHECK(j.as_case.reason.find("nested deeper than 16 levels") != std::string::npos);
    CHECK(j.as_lab.status == Status::no_result);
  }
  // Deep but closed: still refused before parsing.
  Judged closed = judge_bytes(std::string(100'000, '[') + std::string(100'000, ']'));
  CHECK(closed.as_case.reason.find("nested deeper") != std::string::npos);
}

TEST_CASE("fuzz: a field of the wrong type is named, whatever the status") {
  struct Bad {
    std::string doc, says;
  };
  const std::vector<Bad> bad = {
      {R"({"status":"exception","type":"std::runtime_error","message":5})",
       "has a message that is not a string"},
      {R"({"status":"ok","message":{"a":1}})", "has a message that is not a string"},
      {R"({"status":"not-implemented","message":null})", "has a message that is not a string"},
      {R"({"status":"exception","type":[],"message":"m"})", "has a type that is not a string"},
      {R"({"status":7})", "has a status that is not a string"},
      {R"({"values":{}})", "lacks a status"},
      {R"([1,2])", "is not a JSON object"},
      {R"({"status":"ok","values":[]})", "has values that are not an object"},
      {R"({"status":"ok","values":{"sum":{"data":{}}}})", "neither a number nor an array"},
      {R"({"status":"ok","values":{"sum":{"dtype":"fp32"}}})", "without data"},
      {R"({"status":"ok","values":{"sum":{"data":[1,"x"]}}})", "whose element 1 is not a number"},
      {R"({"status":"ok","values":{"sum":{"data":1,"dtype":32}}})", "dtype that is not a string"},
      {R"({"status":"ok","measures":{"messages_per_rank":true}})", "is not a number"},
      {R"({"status":"ok","values":{"sum":{"data":1e999}}})", "is not valid JSON"},
  };
  for (const auto& b : bad) {
    Judged j = judge_bytes(b.doc);
    INFO(b.doc << " -> " << j.as_case.reason);
    CHECK(j.as_case.status == Status::no_result);
    CHECK(j.as_case.reason.find(b.says) != std::string::npos);
  }
}

TEST_CASE("fuzz: two results, invalid UTF-8 and a cut document are each named") {
  const std::string ref = reference_case();
  Judged two = judge_bytes(ref + ref);
  CHECK(two.as_case.status == Status::no_result);
  CHECK(two.as_case.reason.find("more than one JSON document") != std::string::npos);
  std::string utf = ref;
  utf.insert(utf.find("\"values\"") + 2, "\xff");
  Judged bad_utf = judge_bytes(utf);
  CHECK(bad_utf.as_case.reason.find("invalid UTF-8 at byte") != std::string::npos);
  Judged cut = judge_bytes(ref.substr(0, ref.size() / 2));
  CHECK(cut.as_case.status == Status::no_result);
  CHECK(cut.as_case.reason.find("is cut short") != std::string::npos);
  CHECK(judge_bytes("  ").as_case.reason.find("is empty") != std::string::npos);
}

TEST_CASE("fuzz: huge sizes cost the case and keep the reason short") {
  // An 8 MB message: kept to kResultMaxText bytes.
  Judged big = judge_bytes(R"({"status":"exception","type":"t","message":")" +
                           std::string(8 << 20, 'm') + "\"}");
  CHECK(big.as_case.status == Status::crashed);
  CHECK(big.as_case.reason.size() < kResultMaxText + 100);
  // A value of four million elements where the reference has a few: the shape is wrong.
  std::string many = R"({"status":"ok","values":{"sum_rank0":{"data":[)";
  for (int i = 0; i < 4'000'000; ++i) many += i ? ",0" : "0";
  many += "]}}}";
  Judged wide = judge_bytes(many);
  CHECK(wide.as_case.status == Status::wrong);
  // A name of a megabyte is refused by name length, not copied into the reason.
  Judged long_name = judge_bytes(R"({"status":"ok","values":{")" + std::string(1 << 20, 'n') +
                                 R"(":{"data":1}}})");
  CHECK(long_name.as_case.status == Status::no_result);
  CHECK(long_name.as_case.reason.size() < 200);
}

TEST_CASE("fuzz: a stored reference entry is read with the same bounds") {
  // The reference cache holds {"stamp", "case", "result"}: one level more than a result.
  CHECK_FALSE(parse_json_bounded(std::string(100, '['), kResultMaxDepth + 1).ok);
  ParsedJson entry =
      parse_json_bounded(R"({"stamp":"s","result":{"status":"ok","values":{"x":{"data":[1,2]}}}})",
                         kResultMaxDepth + 1);
  REQUIRE(entry.ok);
  CHECK(validate_result(entry.doc["result"]).ok);
  CHECK_FALSE(validate_result(nlohmann::json{{"status", "ok"}, {"values", 3}}).ok);
}

TEST_CASE("fuzz: the seed corpus and its mutations never stop the judge") {
  REQUIRE(fixture_ready());
  const std::vector<std::string> all = seeds();
  REQUIRE(all.size() >= 4);
  const char* env = std::getenv("MGPU_FUZZ_SECONDS");
  const double budget_s = env ? std::atof(env) : 3.0;
  std::mt19937_64 rng(20261201);
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  std::size_t runs = 0, passed = 0;
  std::map<Status, std::size_t> statuses;
  for (std::size_t i = 0; elapsed() < budget_s; ++i) {
    const std::string input = i < all.size() ? all[i] : mutate(all[rng() % all.size()], rng, all);
    try {
      Judged j = judge_bytes(input, i % 97 == 0 ? 1 : 0);
      ++statuses[j.as_case.status];
      passed += j.as_case.status == Status::passed;
    } catch (const std::exception& e) {
      FAIL("input " << i << " threw out of the judge: " << e.what() << "\n"
                    << escaped_prefix(input));
    }
    ++runs;
  }
  std::string counts;
  for (const auto& [s, n] : statuses)
    counts += std::string(" ") + status_name(s) + "=" + std::to_string(n);
  MESSAGE(runs << " inputs in " << elapsed() << " s:" << counts);
  CHECK(runs > all.size());
  CHECK(passed >= 1);  // the corpus's right answers were judged right
}
