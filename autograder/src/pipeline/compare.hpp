// Judging a case: the student's named values against the reference's, as numpy.isclose with the
// reference as b, and the student's measured costs against the rubric's budgets; a GPU lab's
// outputs by their error relative to the output's scale.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rubric/rubric.hpp"

namespace mgpu::grade {

/// The verdict on a case's values.
struct Comparison {
  bool ok = true;                       ///< every value within tolerance
  std::string reason;                   ///< one line when not ok
  double max_abs_error = 0;             ///< over every compared element
  double max_rel_error = 0;             ///< |a-b|/|b| over elements with b != 0
  std::size_t nan_count = 0;            ///< NaN where the reference has a number
  std::vector<std::string> mismatches;  ///< first and worst wrong element per value, "first wrong:
                                        ///< v[3]: got 0.25, expected 0.2"
  std::vector<std::string>
      hints;                   ///< clean-factor observations ("every wrong element of g is 4x ...")
  std::string tolerances;      ///< the tolerance each value was judged with
  std::string detail() const;  ///< multi-line feedback
};

/// Decodes one element written by the harness (number or "nan"/"inf"/"-inf"); false if neither.
bool decode_number(const nlohmann::json& j, double& out);

/// |a-b| <= atol + rtol*|b|; NaN only where b is NaN, infinities only where b has the same one.
bool is_close(double a, double b, Tolerance t);

/// Compares every value the reference emitted with the student's value of the same name.
Comparison compare_values(const nlohmann::json& student_values,
                          const nlohmann::json& reference_values, const Rubric& rubric,
                          const CaseSpec& spec);

/// Every output the reference GPU lab wrote against the submission's output of the same name, by
/// the case's error measure (max_rel or norm_rel, relative to the output's scale) and tolerance.
/// A missing output, a length that differs or a NaN fails.
Comparison compare_lab_values(const nlohmann::json& student, const nlohmann::json& reference,
                              const GpuLabCase& c);

/// The verdict on one budget.
struct BudgetCheck {
  bool ok = false;           ///< within budget (and above the floor, if any)
  bool below_floor = false;  ///< under the budget's floor: the case itself is wrong
  double student = 0;        ///< measured in the student's run
  double reference = 0;      ///< measured in the reference run
  std::string line;          ///< "bytes_sent 2.00x reference (budget 1.05x)"
};

/// Checks one budget against both runs' "measures".
BudgetCheck check_budget(const Budget& b, const nlohmann::json& student_measures,
                         const nlohmann::json& reference_measures);

}  // namespace mgpu::grade
