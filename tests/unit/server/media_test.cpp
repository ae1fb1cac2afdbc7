// Image URL handling: strict base64 (RFC 4648 test vectors), data: URLs, file:// confinement.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "server/media.h"

namespace tf {
namespace {

std::string decoded(const std::string& b64) {
  auto r = base64_decode_strict(b64);
  EXPECT_TRUE(r.ok()) << b64;
  return r.ok() ? std::string(r->begin(), r->end()) : "";
}

TEST(Base64, Rfc4648Vectors) {
  EXPECT_EQ(decoded(""), "");
  EXPECT_EQ(decoded("Zg=="), "f");
  EXPECT_EQ(decoded("Zm8="), "fo");
  EXPECT_EQ(decoded("Zm9v"), "foo");
  EXPECT_EQ(decoded("Zm9vYg=="), "foob");
  EXPECT_EQ(decoded("Zm9vYmE="), "fooba");
  EXPECT_EQ(decoded("Zm9vYmFy"), "foobar");
  EXPECT_EQ(decoded("+/+/"), "\xfb\xff\xbf");
}

TEST(Base64, RejectsAnythingNonCanonical) {
  for (const char* bad :
       {"Zg=", "Zg", "Z===", "Zm9v\n", "Zm9 v", "Zm-v", "Zm_v", "=Zm9", "Zg==Zg==", "Z=g="}) {
    EXPECT_FALSE(base64_decode_strict(bad).ok()) << bad;
  }
}

class FileUrls : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() / ("tf_media_" + std::to_string(::getpid()));
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ / "allowed" / "sub");
    std::filesystem::create_directories(root_ / "outside");
    std::ofstream(root_ / "allowed" / "sub" / "a b.png") << "PNGBYTES";
    std::ofstream(root_ / "outside" / "secret.png") << "SECRET";
    std::filesystem::create_symlink(root_ / "outside" / "secret.png", root_ / "allowed" / "link.png");
    std::filesystem::create_directory_symlink(root_ / "outside", root_ / "allowed" / "dirlink");
    policy_.allowed_dir = (root_ / "allowed").string();
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string url(const std::string& rel) { return "file://" + (root_ / rel).string(); }

  std::filesystem::path root_;
  MediaPolicy policy_;
};

TEST_F(FileUrls, InsideIsReadPercentDecoded) {
  auto r = load_image_url("file://" + (root_ / "allowed" / "sub").string() + "/a%20b.png", 1, policy_);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(std::string(r->begin(), r->end()), "PNGBYTES");
}

TEST_F(FileUrls, EscapesAreRefused) {
  const std::string outside = "image 2: file path is outside --allowed-media-dir";
  for (const std::string& u :
       {url("allowed/../outside/secret.png"), url("allowed/sub/../../outside/secret.png"),
        url("allowed/link.png"), url("allowed/dirlink/secret.png"), url("outside/secret.png"),
        std::string("file:///etc/passwd")}) {
    auto r = load_image_url(u, 2, policy_);
    ASSERT_FALSE(r.ok()) << u;
    EXPECT_EQ(r.error().message, outside) << u;
  }
}

TEST_F(FileUrls, MissingDirectoryAndRelativeForms) {
  auto r = load_image_url(url("allowed/none.png"), 1, policy_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "image 1: file not found under --allowed-media-dir");
  r = load_image_url(url("allowed/sub"), 1, policy_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "image 1: not a regular file");
  r = load_image_url("file://relative/a.png", 1, policy_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "image 1: file:// URLs must name an absolute local path (file:///path)");
  r = load_image_url(url("allowed/sub/a%2"), 1, policy_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "image 1: malformed file:// URL (bad percent escape)");
}

TEST(DataUrls, MimeTypesAndCase) {
  MediaPolicy p;
  for (const char* u : {"data:image/png;base64,Zm9v", "data:image/jpeg;base64,Zm9v",
                        "data:IMAGE/WEBP;BASE64,Zm9v", "data:image/jpg;base64,Zm9v"}) {
    auto r = load_image_url(u, 1, p);
    ASSERT_TRUE(r.ok()) << u;
    EXPECT_EQ(std::string(r->begin(), r->end()), "foo");
  }
  auto r = load_image_url("data:text/plain;base64,Zm9v", 3, p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "image 3 is not PNG, JPEG or WebP; send one of those");
}

}  // namespace
}  // namespace tf
