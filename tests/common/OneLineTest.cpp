#include "common/OneLine.h"

#include <gtest/gtest.h>

namespace engram {
namespace {

TEST(OneLineTest, JoinsTheLinesOfAMessageTrimmedWithOneSpace) {
  EXPECT_EQ(one_line("NCCL error in: pg.cpp:89, unhandled system error\n"
                     "ncclSystemError: System call failed. \n"
                     "Last error:\n"
                     "  socketPoll: Connection closed by remote peer\n"),
            "NCCL error in: pg.cpp:89, unhandled system error ncclSystemError: System call "
            "failed. Last error: socketPoll: Connection closed by remote peer");
}

TEST(OneLineTest, DropsBlankLinesAndCarriageReturns) {
  EXPECT_EQ(one_line("\n\r\n  first \r\n\t\n second\n\n"), "first second");
}

TEST(OneLineTest, LeavesOneLineAsItIsAndNothingAsNothing) {
  EXPECT_EQ(one_line("cannot open 'x': No such file"), "cannot open 'x': No such file");
  EXPECT_EQ(one_line(""), "");
  EXPECT_EQ(one_line(" \n \t\n"), "");
}

}  // namespace
}  // namespace engram
