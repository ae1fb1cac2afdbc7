// Test-only switches inside the backends, for the planted controls of the contract tests (a control
// must show that a test catches the fault it guards against). Production code never calls them.
// Plain C++: the tests build with or without CUDA.
#pragma once
#include <cstdint>

namespace tf {
class Backend;
}

namespace tf::test_hooks {

// Fault injection (the engine-failure tests): the n-th call from now (n >= 1; compute ops and transfers,
// not allocations or frees) of backend `b` fails as a CUDA error does on the CUDA backend: it throws
// tf::DeviceError (backend/device_error.h), and b refuses every later call the same way. The CPU and the
// CUDA backend. 0 disarms a fault that has not fired; a fired one is permanent.
void fail_backend_op(Backend& b, int64_t n);

// The CPU ops' SIMD paths (backend/cpu/simd.h): -1 (production) the CPU's best unless TF_CPU_SIMD caps it,
// 0 none, 1 at most AVX2, 2 at most AVX-512. The same bits at every level (OpSimd). Returns whether the
// CPU has the level asked for (AVX2 for 0 and 1).
bool set_cpu_simd(int mode);

// CPU paged_attention (backend/cpu/attention.cpp): segments of at most `rows` rows read the pool's blocks in
// place, larger ones gather their keys first; -1 restores the default (16). The same bits either way.
void set_cpu_paged_tile_rows(int64_t rows);

// The CUDA tensor-core linear (backend/cuda/linear_tc.cu) cuts k into fixed chunks of 256 in every
// configuration; this makes its <= 16-row configuration alone use chunks of kc (a positive multiple of
// 64), which breaks batch invariance on purpose. 0 restores the contract. Returns false where the
// build has no CUDA backend.
bool set_cuda_linear_small_rows_chunk(int kc);

// The <= 64-row linear of backend/cuda/linear_tc_small.cu launches at most the blocks that fit on the SMs,
// each walking several column tiles; this caps the grid at `blocks` instead (0: the device's), so small
// calls walk many tiles per block too. The same bits (contract). False where the build has no CUDA backend.
bool set_cuda_linear_small_grid_cap(int blocks);
// The fused forms of rms_norm_linear, rms_norm_linear_glu and linear_add (backend/cuda/linear_tc_small.cuh),
// layer_tail's kernel and the large-row fused stores: all on (TF_CUDA_FUSED_LINEAR=31; production runs 23)
// where they apply, or all off (the ops they fuse, in turn). False without CUDA.
bool set_cuda_fused_linear(bool on);
// Calls of linear_add / rms_norm_linear_glu run as the wgmma linear with a fused store (>= 17 rows,
// TF_CUDA_FUSED_LINEAR bit 16; backend/cuda/linear_tc.cu) so far, and the control that skips their
// intermediate rounding (on: the bits differ from the ops in turn). 0 / false without CUDA.
int64_t cuda_linear_large_fused_calls();
bool set_cuda_linear_large_fused_planted(bool on);
// Launches of backend/cuda/layer_tail.cu's kernel so far (Backend::layer_tail as one kernel; 0 without CUDA).
int64_t cuda_layer_tail_launches();

// Which tile configuration runs linears of 17 rows or more that the split form does not take: 0 the first one
// (128 x 128 blocks, the chunk sums in shared memory; cuda_linear_large_default() names the production one),
// 1 128 x 64 blocks with the sums in registers, 2 .. cuda_linear_large_configs() - 1 the candidates of
// backend/cuda/linear_tc_large.cu (swizzled stages; their shapes are listed there and in
// cuda_linear_large_config_name). All compute the same sums in the same order (a speed choice; the contract
// test checks their bits are equal). False without CUDA.
bool set_cuda_linear_large_config(int which);
int cuda_linear_large_configs();                       // 0 without CUDA
int cuda_linear_large_default();                       // the configuration production runs
const char* cuda_linear_large_config_name(int which);  // e.g. "128x128 k64 s3 8w 64x32 reg"

// Which kernel runs linears of <= 64 rows: 0 the chunks kernel of backend/cuda/linear_tc.cu, 1 ..
// cuda_linear_small_configs() - 1 the candidates of backend/cuda/linear_tc_small.cu (listed there and in
// cuda_linear_small_config_name). All compute the same sums in the same order (a speed choice; the contract
// test checks their bits are equal). False without CUDA.
bool set_cuda_linear_small_config(int which);
int cuda_linear_small_configs();                       // 0 without CUDA
int cuda_linear_small_default();                       // the configuration production runs
const char* cuda_linear_small_config_name(int which);  // e.g. "gemv 8/16 cols (<=4/<=16 rows), <=16 warps"
// Calls of at least `rows` rows (up to 256) whose output tiles are too few for the SMs run the tiled linear
// split by k chunk (backend/cuda/linear_split.cu); a larger value (257) turns the split form off. The same
// bits either way (contract). False without CUDA.
bool set_cuda_linear_split_min_rows(int rows);
int cuda_linear_split_min_rows_default();  // 0 without CUDA
int cuda_linear_split_min_rows();          // the current value (0 without CUDA)
int64_t cuda_linear_split_calls();         // split-form launches so far (0 without CUDA)
// Calls whose k has fewer 256-wide chunks than this (at least 2) run unsplit. The same bits either way.
// False without CUDA.
bool set_cuda_linear_split_min_chunks(int chunks);
int cuda_linear_split_min_chunks_default();  // 0 without CUDA
// The split form's partials on the 64 x 64 mma.sync tiles even where the wgmma blocks apply (on), or the
// production choice (off). The same bits. False without CUDA.
bool set_cuda_linear_split_mma(bool on);

// Which flash-attention kernel runs (backend/cuda/attention_tc.cu): 0 the first, 1 .. the variants
// listed there (same bits per row). False without CUDA.
bool set_cuda_attention_variant(int which);
int cuda_attention_variants();  // 0 without CUDA
int cuda_attention_default();   // the variant production runs
// The flash attention's key splits (backend/cuda/attention_split.cuh): keys per split (a multiple of 64; 0
// restores production's: 512 at head_dim <= 64, 256 above), which moves the fold points of every row with
// more keys on purpose; and whether calls of few rows per sequence may run one block per split (true,
// production) or fold in the block (false; the same bits). False without CUDA.
bool set_cuda_attention_split(int keys);
bool set_cuda_attention_partials(bool on);
// Whether the split-parallel form packs the query heads of a kv head into one block: -1 (production) when
// that still leaves >= 128 blocks, 0 never, 1 always (same bits). False without CUDA.
bool set_cuda_attention_pack(int mode);
// Few-row paged calls (decode, verification) in attention_tc_decode.cu's 16-row blocks (true, the default) or
// in attention_tc.cu's 64-row blocks with one live warp; the same bits.
bool set_cuda_attention_decode_form(bool on);
// Within that form, calls whose blocks fit on the SMs at once run attention_tc_decode_chunks.cu's chunks of
// four key tiles: -1 (production) by that rule, 0 never, 1 whenever the call does not fold its key splits in
// the block; the same bits. False without CUDA.
bool set_cuda_attention_decode_chunks(int mode);
// Split-parallel few-row calls: 0 (production) a merge launch folds the splits (attention_merge.cu), 1 the
// last block of each row group (attention_decode.cuh, merge_if_last); the same bits. False without CUDA.
bool set_cuda_attention_fused_merge(int mode);
// Warps per block of attention_tc_decode.cu's tile ring: 0 (production) eight while the call's blocks fit on
// the SMs at once, else four; 4 or 8 always; the same bits. False without CUDA.
bool set_cuda_attention_decode_warps(int warps);
// Programmatic dependent launch for the decode step's kernels (backend/cuda/pdl.cuh; on by default,
// TF_CUDA_PDL=0 turns it off); the same bits either way.
bool set_cuda_pdl(bool on);

// Which gated delta rule kernel the CUDA backend runs: 0 (default) the CPU's recurrent arithmetic bit for
// bit (backend/cuda/gated_delta_rule.cu) and the chunked form on tensor cores where its head dims allow
// (gated_delta_rule_chunks_tc.cu: held to the CPU by a tolerance), else the CPU's chunked arithmetic bit for
// bit (gated_delta_rule_chunks.cu); 1 the per-token recurrence for both (gated_delta_rule_seq.cu: held to
// the CPU by a tolerance; off by default, see its header); 2 as 0 with the chunked form always the
// CPU-exact kernels. False without CUDA.
bool set_cuda_delta_rule_variant(int which);

// Planted faults in the CUDA sample kernel (backend/cuda/sample.cu) for its contract test: 0 (default)
// none; 1 each row draws with the RNG counter of the next output position; 2 each row samples at row
// 0's temperature (a row's token depends on the other rows). False without CUDA.
bool set_cuda_sample_variant(int which);

}  // namespace tf::test_hooks
