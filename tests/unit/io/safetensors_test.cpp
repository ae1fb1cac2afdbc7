#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>

#include "io/safetensors_writer.h"
#include "io_test_util.h"

namespace tf {
namespace {

using testing::iota_bytes;
using testing::raw_safetensors;
using testing::TempDir;

// Parses bytes and returns the error message ("" when the file is accepted).
std::string refusal(const std::vector<uint8_t>& bytes, const std::string& label = "model.safetensors") {
  auto f = SafetensorsFile::from_memory(bytes.data(), bytes.size(), label);
  return f.ok() ? std::string() : f.error().message;
}

std::string refusal(const std::string& header, size_t data_bytes) {
  return refusal(raw_safetensors(header, iota_bytes(data_bytes)));
}

TEST(Safetensors, ValidFileLoadsWithRightBytes) {
  // Two tensors back to back; offsets relative to the data section.
  std::string header =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
      R"("a":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]}})";
  std::vector<uint8_t> data = iota_bytes(16);
  std::vector<uint8_t> bytes = raw_safetensors(header, data);
  auto f = SafetensorsFile::from_memory(bytes.data(), bytes.size(), "x.safetensors");
  ASSERT_TRUE(f.ok()) << f.error().message;
  ASSERT_EQ(f->tensors().size(), 2u);
  EXPECT_EQ(f->tensors()[0].name, "a");  // sorted by name
  EXPECT_EQ(f->metadata().at("format"), "pt");
  EXPECT_EQ(f->data_size(), 16u);
  EXPECT_EQ(f->header_size(), header.size());
  const SafetensorsEntry* a = f->find("a");
  const SafetensorsEntry* b = f->find("b");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(f->find("c"), nullptr);
  EXPECT_EQ(a->dtype, DType::BF16);
  EXPECT_EQ(a->shape, (Shape{2, 2}));
  EXPECT_EQ(b->dtype, DType::F32);
  EXPECT_EQ(a->nbytes(), 8u);
  EXPECT_EQ(0, std::memcmp(a->data, data.data(), 8));
  EXPECT_EQ(0, std::memcmp(b->data, data.data() + 8, 8));
  EXPECT_EQ(a->data, bytes.data() + 8 + header.size());
}

TEST(Safetensors, OpenMapsFileAndWriterRoundTrips) {
  TempDir dir;
  SafetensorsWriter w;
  float f32[3] = {1.5f, -2.0f, 3.25f};
  uint16_t bf[4] = {0x3f80, 0x4000, 0xc040, 0x0000};
  int64_t i64[2] = {-7, 1LL << 40};
  ASSERT_TRUE(w.add("w.f32", DType::F32, {3}, f32).ok());
  ASSERT_TRUE(w.add("w.bf16", DType::BF16, {2, 2}, bf).ok());
  ASSERT_TRUE(w.add("w.i64", DType::I64, {2}, i64).ok());
  ASSERT_TRUE(w.add("empty", DType::F32, {0, 4}, nullptr).ok());
  EXPECT_FALSE(w.add("w.f32", DType::F32, {3}, f32).ok());  // twice
  w.set_metadata("format", "pt");
  std::string path = dir / "model.safetensors";
  ASSERT_TRUE(w.write(path).ok());

  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->header_size() % 8, 0u);  // padded like the reference writer
  EXPECT_EQ(f->label(), "model.safetensors");
  EXPECT_EQ(f->metadata().at("format"), "pt");
  ASSERT_EQ(f->tensors().size(), 4u);
  const SafetensorsEntry* e = f->find("w.f32");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(0, std::memcmp(e->data, f32, sizeof f32));
  e = f->find("w.bf16");
  EXPECT_EQ(e->shape, (Shape{2, 2}));
  EXPECT_EQ(0, std::memcmp(e->data, bf, sizeof bf));
  e = f->find("w.i64");
  EXPECT_EQ(0, std::memcmp(e->data, i64, sizeof i64));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(e->data) % 8, 0u);  // largest element first keeps alignment
  EXPECT_EQ(f->find("empty")->nbytes(), 0u);
}

TEST(Safetensors, RefusesMissingFile) {
  auto f = SafetensorsFile::open("/nonexistent/dir/model.safetensors");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().message, "/nonexistent/dir/model.safetensors: cannot open: No such file or directory");
}

TEST(Safetensors, RefusesTruncatedFile) {
  TempDir dir;
  std::string path = dir / "model.safetensors";
  testing::write_file(path, std::string("\x10\x00\x00", 3));
  auto f = SafetensorsFile::open(path);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().message,
            "model.safetensors: file is 3 bytes, too short to hold the 8-byte header length (truncated?)");
  EXPECT_EQ(refusal(std::vector<uint8_t>{}),
            "model.safetensors: file is 0 bytes, too short to hold the 8-byte header length (truncated?)");
}

TEST(Safetensors, RefusesFileTruncatedInsideData) {
  std::string header = R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
  EXPECT_EQ(
      refusal(header, 12),
      "model.safetensors: tensor 'a' data_offsets [0, 16] run past the end of the data section (12 bytes; "
      "truncated file?)");
}

TEST(Safetensors, RefusesHeaderLengthPastEof) {
  std::string header = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  auto bytes = raw_safetensors(header, iota_bytes(4), 1000);
  EXPECT_EQ(refusal(bytes), "model.safetensors: header length 1000 runs past the end of the file (" +
                                std::to_string(bytes.size()) + " bytes; truncated?)");
}

TEST(Safetensors, RefusesHugeHeaderLength) {
  auto bytes = raw_safetensors("{}", {}, 200'000'000);
  EXPECT_EQ(refusal(bytes),
            "model.safetensors: header length 200000000 exceeds the limit of 100000000 bytes (not a "
            "safetensors file?)");
  bytes = raw_safetensors("{}", {}, UINT64_MAX - 1);
  EXPECT_NE(refusal(bytes).find("exceeds the limit"), std::string::npos);
}

TEST(Safetensors, RefusesHeaderNotJson) {
  std::string msg = refusal("{not json at all}", 0);
  EXPECT_EQ(msg.rfind("model.safetensors: header is not valid JSON: parse error at line 1, column 3", 0), 0u)
      << msg;
  msg = refusal(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})", 4);  // unterminated
  EXPECT_EQ(msg.rfind("model.safetensors: header is not valid JSON", 0), 0u) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);  // one line
  EXPECT_EQ(refusal("[1, 2, 3]", 0), "model.safetensors: header must be a JSON object, got [1,2,3]");
  EXPECT_EQ(refusal("\"x\"", 0), "model.safetensors: header must be a JSON object, got \"x\"");
  EXPECT_EQ(refusal("{", 0), "model.safetensors: header of 1 bytes cannot hold a JSON object");
}

TEST(Safetensors, RefusesDeepNesting) {
  std::string header = R"({"__metadata__":)" + std::string(100, '[') + std::string(100, ']') + "}";
  EXPECT_EQ(refusal(header, 0), "model.safetensors: header JSON nests deeper than 16 levels");
}

TEST(Safetensors, AcceptsTrailingSpacePadding) {
  std::string header = R"({"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}})" + std::string(5, ' ');
  EXPECT_EQ(refusal(header, 3), "");
}

TEST(Safetensors, RefusesOffsetsOutOfRange) {
  EXPECT_EQ(
      refusal(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 12),
      "model.safetensors: tensor 'x' data_offsets [8, 16] run past the end of the data section (12 bytes; "
      "truncated file?)");
  EXPECT_EQ(refusal(R"({"x":{"dtype":"F32","shape":[0],"data_offsets":[9,4]}})", 12),
            "model.safetensors: tensor 'x' data_offsets [9, 4] end before they begin");
  EXPECT_EQ(refusal(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", 12),
            "model.safetensors: tensor 'x' data_offsets must be two non-negative integers [begin, end], got "
            "[-8,0]");
  EXPECT_EQ(
      refusal(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", 12),
      "model.safetensors: tensor 'x' data_offsets must be two non-negative integers [begin, end], got [0]");
  EXPECT_EQ(refusal(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0, 8.0]}})", 12),
            "model.safetensors: tensor 'x' data_offsets must be two non-negative integers [begin, end], got "
            "[0,8.0]");
  // Larger than any uint64: nlohmann reads it as a float, which is refused.
  EXPECT_NE(refusal(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0, 99999999999999999999999]}})", 12)
                .find("must be two non-negative integers"),
            std::string::npos);
}

TEST(Safetensors, RefusesSizeMismatch) {
  EXPECT_EQ(refusal(R"({"x":{"dtype":"BF16","shape":[2,4],"data_offsets":[0,12]}})", 16),
            "model.safetensors: tensor 'x' data_offsets [0, 12] hold 12 bytes but BF16 [2, 4] needs 16");
  EXPECT_EQ(refusal(R"({"x":{"dtype":"F32","shape":[],"data_offsets":[0,8]}})", 16),
            "model.safetensors: tensor 'x' data_offsets [0, 8] hold 8 bytes but F32 [] needs 4");
  // numel * size overflowing 64 bits must not wrap around to a small number.
  EXPECT_EQ(refusal(R"({"x":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})", 16),
            "model.safetensors: tensor 'x' shape [4611686018427387904, 4] is too large to address");
  EXPECT_EQ(refusal(R"({"x":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,0]}})", 16),
            "model.safetensors: tensor 'x' shape [2305843009213693952] is too large to address");
}

TEST(Safetensors, RefusesOverlap) {
  EXPECT_EQ(refusal(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                    16),
            "model.safetensors: tensors 'a' [0, 16] and 'b' [8, 16] overlap");
  EXPECT_EQ(refusal(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]},)"
                    R"("b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})",
                    16),
            "model.safetensors: tensors 'a' [4, 8] and 'b' [4, 8] overlap");
  // Touching ranges and empty tensors inside another's range do not overlap.
  EXPECT_EQ(refusal(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                    R"("e":{"dtype":"F32","shape":[0],"data_offsets":[2,2]},)"
                    R"("b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})",
                    8),
            "");
}

TEST(Safetensors, RefusesUnknownDtype) {
  EXPECT_EQ(refusal(R"({"w":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})", 2),
            "model.safetensors: tensor 'w' has dtype F8_E4M3, which tensorfold does not support (supported: "
            "F64, F32, "
            "F16, BF16, I64, I32, I16, U16, I8, U8, BOOL)");
  EXPECT_EQ(refusal(R"({"w":{"dtype":7,"shape":[2],"data_offsets":[0,2]}})", 2),
            "model.safetensors: tensor 'w' dtype must be a string, got 7");
  EXPECT_EQ(refusal(R"({"w":{"shape":[2],"data_offsets":[0,2]}})", 2),
            "model.safetensors: tensor 'w' has no dtype");
}

TEST(Safetensors, AcceptsEveryKnownDtype) {
  for (const char* name : {"F64", "F32", "F16", "BF16", "I64", "I32", "I16", "U16", "I8", "U8", "BOOL"}) {
    DType d = *dtype_from_name(name);
    size_t n = 3 * dtype_size(d);
    std::string header = std::string(R"({"t":{"dtype":")") + name + R"(","shape":[3],"data_offsets":[0,)" +
                         std::to_string(n) + "]}}";
    EXPECT_EQ(refusal(header, n), "") << name;
  }
}

TEST(Safetensors, RefusesDuplicateNames) {
  EXPECT_EQ(refusal(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                    R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                    2),
            "model.safetensors: header names tensor 'a' twice");
  EXPECT_EQ(refusal(R"({"a":{"dtype":"U8","shape":[1],"dtype":"F32","data_offsets":[0,1]}})", 2),
            "model.safetensors: header has the key 'dtype' twice in one object");
  // The same key in different objects is fine.
  EXPECT_EQ(refusal(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                    R"("b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                    2),
            "");
}

TEST(Safetensors, RefusesBadShape) {
  EXPECT_EQ(refusal(R"({"x":{"dtype":"F32","shape":[2,-1],"data_offsets":[0,8]}})", 8),
            "model.safetensors: tensor 'x' shape must be a list of non-negative integers, got [2,-1]");
  EXPECT_EQ(refusal(R"({"x":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", 8),
            "model.safetensors: tensor 'x' shape must be a list of non-negative integers, got [2.5]");
  EXPECT_EQ(refusal(R"({"x":{"dtype":"F32","shape":"2","data_offsets":[0,8]}})", 8),
            "model.safetensors: tensor 'x' shape must be a list of non-negative integers, got \"2\"");
  EXPECT_EQ(refusal(R"({"x":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,8]}})", 8),
            "model.safetensors: tensor 'x' shape must be a list of non-negative integers, got "
            "[18446744073709551615]");
  EXPECT_EQ(refusal(R"({"x":{"dtype":"F32","data_offsets":[0,8]}})", 8),
            "model.safetensors: tensor 'x' has no shape");
  EXPECT_EQ(refusal(R"({"x":{"dtype":"F32","shape":[2]}})", 8),
            "model.safetensors: tensor 'x' has no data_offsets");
  EXPECT_EQ(refusal(R"({"x":[1,2]})", 8), "model.safetensors: tensor 'x' must be a JSON object, got [1,2]");
}

TEST(Safetensors, MetadataMustBeStrings) {
  EXPECT_EQ(refusal(R"({"__metadata__":{"format":1}})", 0),
            "model.safetensors: __metadata__ must map strings to strings, but 'format' holds 1");
  EXPECT_EQ(refusal(R"({"__metadata__":"pt"})", 0),
            "model.safetensors: __metadata__ must be an object of strings, got \"pt\"");
  EXPECT_EQ(refusal(R"({"__metadata__":{}})", 0), "");
}

TEST(Safetensors, FromBytesOwnsItsData) {
  std::string header = R"({"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}})";
  auto f = SafetensorsFile::from_bytes(raw_safetensors(header, {9, 8, 7}), "owned");
  ASSERT_TRUE(f.ok()) << f.error().message;
  SafetensorsFile moved = std::move(f.value());
  EXPECT_EQ(moved.find("a")->data[2], 7);
  EXPECT_EQ(SafetensorsFile::from_bytes({}, "empty").error().message,
            "empty: file is 0 bytes, too short to hold the 8-byte header length (truncated?)");
}

TEST(Safetensors, RefusesDirectory) {
  TempDir dir;
  auto f = SafetensorsFile::open(dir.path());
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().message, dir.path() + ": not a regular file");
}

TEST(Safetensors, MessagesStayOnOneLine) {
  EXPECT_EQ(refusal(R"({"a\nb":{"dtype":"F8","shape":[1],"data_offsets":[0,1]}})", 1).substr(0, 47),
            "model.safetensors: tensor 'a\\x0ab' has dtype F8");
  EXPECT_EQ(one_line("x\ty\x7f"), "x\\x09y\\x7f");
}

}  // namespace
}  // namespace tf
