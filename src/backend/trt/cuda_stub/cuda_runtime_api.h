// Stand-in for the CUDA toolkit's cuda_runtime_api.h, used only when no CUDA include directory is
// found (CI compile checks). The TensorRT headers the shim includes need just these two opaque
// handle types; they are the same types the real header declares, so the ABI is identical.
#pragma once

typedef struct CUevent_st* cudaEvent_t;
typedef struct CUstream_st* cudaStream_t;
