#pragma once
namespace tf::cli {
int ocr_main(int argc, char** argv);       // tensorfold ocr CKPT IMAGE...
int tokenize_main(int argc, char** argv);  // tensorfold tokenize CKPT (--text S | --messages F)
int inspect_main(int argc, char** argv);   // tensorfold inspect CKPT
int bench_main(int argc, char** argv);     // tensorfold bench URL --images DIR
}  // namespace tf::cli
