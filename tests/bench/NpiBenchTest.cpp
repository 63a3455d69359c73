#include "bench/NpiBench.h"
#include "npi/NpiModel.h"

#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>
#include <string>

namespace engram::bench {
namespace {

npi::NpiConfig tiny_config(int layers) {
  npi::NpiConfig c;
  c.observation_sizes = {3};
  c.arg_size = 2;  // features: 3 + 3 * 2 = 9
  c.state_dim = 4;
  c.program_dim = 2;
  c.hidden = 5;  // 20 gates
  c.layers = layers;
  c.key_dim = 3;
  c.num_programs = 2;
  return c;
}

TEST(NpiBench, MatmulFlopsCountEveryProductOfTheStepByHand) {
  // 10 rows in 4 invocations: 6 rows with a recurrent product. Multiply-adds, forward, weight
  // gradient and (but for the one-hot features) input gradient:
  //   encoder  10*9*4 * 2 + 10*4*4 * 3   = 720 + 480
  //   LSTM     10*6*20 * 3 + 6*5*20 * 3  = 3600 + 1800
  //   heads    10*5*(1+3+6) * 3          = 1500
  //   keys     10*3*2 * 3                = 180
  EXPECT_DOUBLE_EQ(npi_step_matmul_flops(tiny_config(1), 10, 4), 2.0 * 8280);
  // A second layer: its input product 10*5*20 * 3 and its recurrent one 6*5*20 * 3.
  EXPECT_DOUBLE_EQ(npi_step_matmul_flops(tiny_config(2), 10, 4), 2.0 * (8280 + 3000 + 1800));
  // One-row invocations have no recurrent product at all.
  EXPECT_DOUBLE_EQ(npi_step_matmul_flops(tiny_config(1), 10, 10), 2.0 * (8280 - 1800));
}

TEST(NpiBench, AJsonPathThatCannotBeWrittenFailsBeforeTheWork) {
  // The peer cannot start either: the error must be the JSON's, found before measuring anything.
  NpiBenchOptions options;
  options.json_path = "/nonexistent/engram/bench.json";
  options.steps = 1;
  options.batch_sizes = {1};
  options.hidden = 8;
  options.python = "/nonexistent/engram/python3";
  std::ostringstream out;
  try {
    run_npi_bench(options, out);
    FAIL() << "ran";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write '/nonexistent/engram/bench.json'"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(out.str(), "");
}

}  // namespace
}  // namespace engram::bench
