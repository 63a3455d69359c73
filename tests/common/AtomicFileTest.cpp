#include "common/AtomicFile.h"

#include "tests/support/TempDir.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>

namespace engram {
namespace {

using testing::read_file;
using testing::TempDir;
using testing::write_file;

TEST(AtomicFile, CommitWritesTheTargetAndLeavesNoTemporaryFile) {
  TempDir dir;
  const std::string target = dir.file("out.txt");
  {
    AtomicFile file(target);
    file.stream() << "hello\n" << 42;
    // Until commit() only the temporary file exists, beside the target.
    EXPECT_TRUE(std::filesystem::exists(file.temporary_path()));
    EXPECT_EQ(std::filesystem::path(file.temporary_path()).parent_path(),
              std::filesystem::path(target).parent_path());
    EXPECT_FALSE(std::filesystem::exists(target));
    file.commit();
  }
  EXPECT_EQ(read_file(target), "hello\n42");
  EXPECT_EQ(dir.entries(), std::set<std::string>{"out.txt"});
}

TEST(AtomicFile, WithoutCommitTheTargetIsNotCreated) {
  TempDir dir;
  {
    AtomicFile file(dir.file("out.txt"));
    file.stream() << "never seen";
  }
  EXPECT_TRUE(dir.entries().empty());
}

TEST(AtomicFile, WithoutCommitAnExistingTargetIsUntouched) {
  TempDir dir;
  const std::string target = dir.file("out.txt");
  write_file(target, "original");
  {
    AtomicFile file(target);
    file.stream() << "replacement";
    // An exception between writing and commit() is the case this protects against.
  }
  EXPECT_EQ(read_file(target), "original");
  EXPECT_EQ(dir.entries(), std::set<std::string>{"out.txt"});
}

TEST(AtomicFile, CommitReplacesAnExistingTarget) {
  TempDir dir;
  const std::string target = dir.file("out.txt");
  write_file(target, "original content that is longer");
  write_file_atomically(target, "new");
  EXPECT_EQ(read_file(target), "new");
  EXPECT_EQ(dir.entries(), std::set<std::string>{"out.txt"});
}

// A replaced file keeps its permissions (a private 0600 model stays private), and a new one gets
// the default's (the umask's).
TEST(AtomicFile, AReplacedFileKeepsItsPermissions) {
  TempDir dir;
  const std::string target = dir.file("private.pt");
  write_file(target, "old");
  ASSERT_EQ(::chmod(target.c_str(), 0600), 0);
  write_file_atomically(target, "new");
  struct stat status {};
  ASSERT_EQ(::stat(target.c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 07777, 0600u);
  EXPECT_EQ(read_file(target), "new");
  const mode_t mask = ::umask(022);
  write_file_atomically(dir.file("new.pt"), "x");
  ::umask(mask);
  ASSERT_EQ(::stat(dir.file("new.pt").c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 07777, 0644u);
}

TEST(AtomicFile, BinaryContentSurvivesUnchanged) {
  TempDir dir;
  const std::string content("a\0b\r\n\xff", 6);
  {
    AtomicFile file(dir.file("bin"), /*binary=*/true);
    file.stream() << content;
    file.commit();
  }
  EXPECT_EQ(read_file(dir.file("bin")), content);
}

TEST(AtomicFile, MissingDirectoryIsARuntimeErrorNamingThePath) {
  TempDir dir;
  const std::string target = dir.file("no/such/dir/out.txt");
  ENGRAM_EXPECT_THROW_WITH(AtomicFile file(target), std::runtime_error, target);
  EXPECT_TRUE(dir.entries().empty());
}

TEST(AtomicFile, AFolderIsRefusedBeforeAnythingIsWritten) {
  // A command probes its output path this way before its work, so `--out DIR` fails at once.
  TempDir dir;
  std::filesystem::create_directory(dir.file("model.pt"));
  ENGRAM_EXPECT_THROW_WITH(AtomicFile file(dir.file("model.pt")), std::runtime_error,
                           "it is a folder");
  EXPECT_EQ(dir.entries(), std::set<std::string>{"model.pt"});
  EXPECT_TRUE(std::filesystem::is_directory(dir.file("model.pt")));
}

TEST(AtomicFile, APipeIsWrittenInPlaceNotReplacedByAFile) {
  // As /dev/null or a shell's >(...): renaming a file over the target would replace the pipe
  // (as root, the device) with a regular file, and the reader would see nothing.
  TempDir dir;
  const std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // so the writer's open returns
  ASSERT_GE(reader, 0);
  write_file_atomically(fifo, "through the pipe");
  char buffer[64] = {};
  const ssize_t got = ::read(reader, buffer, sizeof buffer);
  ::close(reader);
  EXPECT_EQ(std::string(buffer, got > 0 ? static_cast<std::size_t>(got) : 0), "through the pipe");
  struct stat after {};
  ASSERT_EQ(::stat(fifo.c_str(), &after), 0);
  EXPECT_TRUE(S_ISFIFO(after.st_mode));
  EXPECT_EQ(dir.entries(), std::set<std::string>{"pipe"});
}

TEST(AtomicFile, CheckingAPipeOpensNothing) {
  // Opening a pipe to check it and closing it ended its reader (a `cat p` saw end of file) and
  // the real write then waited for a reader forever; with no reader the check itself would block
  // (a regression shows as this test's time limit).
  TempDir dir;
  const std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  check_writable(fifo);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  write_file_atomically(fifo, "after the check");
  char buffer[64] = {};
  const ssize_t got = ::read(reader, buffer, sizeof buffer);
  ::close(reader);
  EXPECT_EQ(std::string(buffer, got > 0 ? static_cast<std::size_t>(got) : 0), "after the check");
  EXPECT_EQ(dir.entries(), std::set<std::string>{"pipe"});
}

TEST(AtomicFile, CheckingAPathLeavesNothingAndNamesWhatIsWrong) {
  TempDir dir;
  check_writable(dir.file("new.pt"));
  EXPECT_TRUE(dir.entries().empty());
  ENGRAM_EXPECT_THROW_WITH(check_writable(dir.file("no/folder/x.pt")), std::runtime_error,
                           "no/folder/x.pt");
  std::filesystem::create_directory(dir.file("sub"));
  ENGRAM_EXPECT_THROW_WITH(check_writable(dir.file("sub")), std::runtime_error, "it is a folder");
  EXPECT_EQ(dir.entries(), std::set<std::string>{"sub"});
}

TEST(AtomicFile, ALinkStaysALinkAndItsFileIsReplaced) {
  // The rename went over the link itself: `model.pt -> runs/v3.pt` became a regular file.
  TempDir dir;
  write_file(dir.file("v3.pt"), "old");
  std::filesystem::create_symlink("v3.pt", dir.file("model.pt"));
  write_file_atomically(dir.file("model.pt"), "new");
  EXPECT_TRUE(std::filesystem::is_symlink(dir.file("model.pt")));
  EXPECT_EQ(read_file(dir.file("v3.pt")), "new");
  EXPECT_EQ(dir.entries(), (std::set<std::string>{"model.pt", "v3.pt"}));
}

TEST(AtomicFile, ALinkIntoProcIsARedirectionWrittenInPlace) {
  // /dev/stdout -> /proc/self/fd/1 -> the file a shell redirected to: the rename replaced the
  // link with a file (as root, /dev/stdout itself) and the redirected file got nothing.
  TempDir dir;
  const int fd = ::open(dir.file("redirected").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  const std::string link = dir.file("stdout");
  std::filesystem::create_symlink("/proc/self/fd/" + std::to_string(fd), link);
  write_file_atomically(link, "through the descriptor");
  ::close(fd);
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_EQ(read_file(dir.file("redirected")), "through the descriptor");
  EXPECT_EQ(dir.entries(), (std::set<std::string>{"redirected", "stdout"}));
}

}  // namespace
}  // namespace engram
