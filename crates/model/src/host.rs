//! What the fused operations on flex share: tensors to and from `f32` buffers, matrix products
//! written straight into buffers through `gemm` (the kernels flex's own matmul uses), and
//! branch-free approximations of transcendental functions, which vectorise where libm's do not.

use burn::backend::flex::FlexTensor;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, Dispatch, Flex, backend_extension};
use burn::tensor::{Device, Tensor, TensorData};

use crate::vectorize::vectorized;

/// The values of a contiguous tensor (see [`FlexTensor::to_contiguous`], free when it already is).
pub(crate) fn f32s(t: &FlexTensor) -> &[f32] {
    t.as_slice::<f32>().expect("a contiguous f32 tensor")
}

/// A tensor holding `values`, without a copy.
pub(crate) fn flex<const D: usize>(values: Vec<f32>, shape: [usize; D]) -> FlexTensor {
    FlexTensor::from_data(TensorData::new(values, shape))
}

/// A row-major matrix in a buffer (or a block of one, rows `row_stride` apart), read as it is
/// or transposed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Matrix<'a> {
    values: &'a [f32],
    /// Of the matrix as stored.
    rows: usize,
    cols: usize,
    row_stride: usize,
    transposed: bool,
}

impl<'a> Matrix<'a> {
    /// `values` as a row-major matrix of `cols` columns.
    pub(crate) fn new(values: &'a [f32], cols: usize) -> Self {
        assert!(
            cols > 0 && values.len().is_multiple_of(cols),
            "a whole number of rows"
        );
        Self::block(values, values.len() / cols, cols, cols)
    }

    /// `rows` rows of `cols` values from the start of `values`, each row `row_stride` values
    /// after the one before.
    pub(crate) fn block(values: &'a [f32], rows: usize, cols: usize, row_stride: usize) -> Self {
        assert!(
            cols <= row_stride && (rows == 0 || (rows - 1) * row_stride + cols <= values.len())
        );
        Self {
            values,
            rows,
            cols,
            row_stride,
            transposed: false,
        }
    }

    /// The same values read as the transpose.
    pub(crate) fn t(self) -> Self {
        Self {
            transposed: !self.transposed,
            ..self
        }
    }

    /// Rows and columns as read.
    fn dims(&self) -> (usize, usize) {
        if self.transposed {
            (self.cols, self.rows)
        } else {
            (self.rows, self.cols)
        }
    }

    /// Strides (column, row) as read.
    fn strides(&self) -> (isize, isize) {
        let row_stride = self.row_stride as isize;
        if self.transposed {
            (row_stride, 1)
        } else {
            (1, row_stride)
        }
    }
}

/// Products of at least this many multiply-adds use every rayon thread (flex's own threshold).
const PARALLEL_PRODUCT: usize = 192 * 192 * 192;

/// `dst ← lhs · rhs`, or `dst ← dst + lhs · rhs` when `accumulate`; `dst` row-major `[rows of
/// lhs, columns of rhs]`.
pub(crate) fn gemm_into(dst: &mut [f32], accumulate: bool, lhs: Matrix, rhs: Matrix) {
    let n = rhs.dims().1;
    gemm_block_into(dst, n, accumulate, lhs, rhs);
}

/// [`gemm_into`] into the block at the start of `dst` whose rows are `dst_row_stride` apart.
pub(crate) fn gemm_block_into(
    dst: &mut [f32],
    dst_row_stride: usize,
    accumulate: bool,
    lhs: Matrix,
    rhs: Matrix,
) {
    let ((m, k), (k_rhs, n)) = (lhs.dims(), rhs.dims());
    assert!(k == k_rhs, "matrix shapes that multiply");
    assert!(n <= dst_row_stride && (m == 0 || (m - 1) * dst_row_stride + n <= dst.len()));
    let ((lhs_cs, lhs_rs), (rhs_cs, rhs_rs)) = (lhs.strides(), rhs.strides());
    let parallelism = if m * n * k >= PARALLEL_PRODUCT {
        gemm::Parallelism::Rayon(0)
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: the three buffers hold blocks of the shapes and strides checked above (here and
    // in `Matrix::block`), and `dst` (borrowed mutably) overlaps neither input.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            dst_row_stride as isize,
            accumulate,
            lhs.values.as_ptr(),
            lhs_cs,
            lhs_rs,
            rhs.values.as_ptr(),
            rhs_cs,
            rhs_rs,
            1.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        );
    }
}

/// [`gemm_into`] of row-major `lhs` `[rows, k]` and `rhs` `[k, n]`.
pub(crate) fn matmul_into(dst: &mut [f32], accumulate: bool, lhs: &[f32], rhs: &[f32], k: usize) {
    gemm_into(
        dst,
        accumulate,
        Matrix::new(lhs, k),
        Matrix::new(rhs, rhs.len() / k),
    );
}

/// tanh as Eigen computes it for f32: a 13/6 rational approximation on [-7.9, 7.9] (beyond
/// which tanh is ±1 in f32), within a few ulp. Unlike libm's `tanhf` it has no branches, so
/// loops of it vectorise.
#[inline(always)]
pub(crate) fn tanh_f32(x: f32) -> f32 {
    let x = x.clamp(-7.905_311, 7.905_311);
    let x2 = x * x;
    let mut p = x2 * -2.760_768_5e-16 + 2.000_188e-13;
    p = x2 * p + -8.604_672e-11;
    p = x2 * p + 5.122_297e-8;
    p = x2 * p + 1.485_722_4e-5;
    p = x2 * p + 6.372_619_3e-4;
    p = x2 * p + 4.893_524_6e-3;
    let mut q = x2 * 1.198_258_4e-6 + 1.185_347_1e-4;
    q = x2 * q + 2.268_434_6e-3;
    q = x2 * q + 4.893_525e-3;
    x * p / q
}

/// The logistic function through [`tanh_f32`].
#[inline(always)]
pub(crate) fn sigmoid_f32(x: f32) -> f32 {
    0.5 + 0.5 * tanh_f32(0.5 * x)
}

/// erf as Eigen and XLA compute it for f32: a 13/8 rational approximation on [-4, 4] (beyond
/// which erf is ±1 in f32), branch-free like [`tanh_f32`].
#[inline(always)]
pub(crate) fn erf_f32(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = x2 * -2.726_142_3e-10 + 2.770_681_4e-8;
    p = x2 * p + -2.101_024e-6;
    p = x2 * p + -5.692_506_4e-5;
    p = x2 * p + -7.349_906_3e-4;
    p = x2 * p + -2.954_6e-3;
    p = x2 * p + -1.609_603_3e-2;
    let mut q = x2 * -1.456_607_2e-5 + -2.133_740_6e-4;
    q = x2 * q + -1.682_827e-3;
    q = x2 * q + -7.373_329e-3;
    q = x2 * q + -1.426_474e-2;
    x * p / q
}

/// The sum of the squares of `t`'s values: read where they lie on flex (off autodiff), rather
/// than squared into a tensor of `t`'s size first; Burn's ops elsewhere.
pub fn sum_of_squares<const D: usize>(t: Tensor<D>) -> f64 {
    let device = t.device();
    if device != Device::flex() || device.is_autodiff() {
        return t.square().sum().into_scalar::<f64>();
    }
    Tensor::<1>::from_dispatch(<Dispatch as HostReductions>::sum_of_squares(
        t.into_dispatch(),
    ))
    .into_scalar::<f64>()
}

/// The sum of the squares of `values`, in f64 over independent lanes (one running sum would
/// wait on each addition in turn).
fn squares(values: &[f32]) -> f64 {
    const LANES: usize = 32;
    vectorized(
        #[inline(always)]
        || {
            let mut lanes = [0.0f64; LANES];
            let chunks = values.chunks_exact(LANES);
            let rest: f64 = chunks
                .remainder()
                .iter()
                .map(|&v| v as f64 * v as f64)
                .sum();
            for chunk in chunks {
                for (lane, &v) in lanes.iter_mut().zip(chunk) {
                    *lane += v as f64 * v as f64;
                }
            }
            lanes.iter().sum::<f64>() + rest
        },
    )
}

/// Reductions read in place on the host.
#[backend_extension(Flex)]
pub trait HostReductions: Backend {
    /// `[1]`: the sum of the squares of `x`'s values.
    fn sum_of_squares(x: FloatTensor<Self>) -> FloatTensor<Self>;
}

impl HostReductions for Flex {
    fn sum_of_squares(x: FlexTensor) -> FlexTensor {
        let x = x.to_contiguous();
        flex(vec![squares(f32s(&x)) as f32], [1])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_of_transposes_match_the_definition() {
        // lhs [2, 3], rhs stored [2, 3] and read transposed as [3, 2].
        let lhs = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let rhs = [1.0, 0.5, -1.0, 2.0, 0.0, 1.0];
        let mut dst = vec![1.0; 4];
        gemm_into(
            &mut dst,
            true,
            Matrix::new(&lhs, 3),
            Matrix::new(&rhs, 3).t(),
        );
        let expected = |i: usize, j: usize| -> f32 {
            1.0 + (0..3).map(|p| lhs[i * 3 + p] * rhs[j * 3 + p]).sum::<f32>()
        };
        assert_eq!(
            dst,
            [
                expected(0, 0),
                expected(0, 1),
                expected(1, 0),
                expected(1, 1)
            ]
        );
        // lhs read transposed: [3, 2] · [2, 3].
        let mut dst = vec![0.0; 9];
        gemm_into(
            &mut dst,
            false,
            Matrix::new(&lhs, 3).t(),
            Matrix::new(&rhs, 3),
        );
        for i in 0..3 {
            for j in 0..3 {
                let want: f32 = (0..2).map(|p| lhs[p * 3 + i] * rhs[p * 3 + j]).sum();
                assert_eq!(dst[i * 3 + j], want);
            }
        }
    }

    #[test]
    fn sums_of_squares_read_in_place_are_burns() {
        let device = Device::flex();
        let t = Tensor::<2>::from_data([[1.0, -2.0], [3.0, 0.5]], &device);
        assert_eq!(sum_of_squares(t.clone()), 14.25);
        assert_eq!(sum_of_squares(t.autodiff()), 14.25);
        let long: Vec<f32> = (0..1000).map(|i| i as f32 / 10.0).collect();
        let want: f64 = long.iter().map(|&v| (v as f64).powi(2)).sum();
        let long = Tensor::<1>::from_data(TensorData::new(long, [1000]), &device);
        assert!((sum_of_squares(long) - want).abs() < 1e-6 * want);
    }

    #[test]
    fn the_approximations_are_within_a_few_ulp_of_f64() {
        for i in -4000..=4000 {
            let x = i as f32 / 500.0;
            let tanh = (x as f64).tanh();
            assert!(
                (tanh_f32(x) as f64 - tanh).abs() <= 4e-7 * tanh.abs().max(1e-3),
                "tanh {x}"
            );
            let erf = erf_f64(x as f64);
            assert!(
                (erf_f32(x) as f64 - erf).abs() <= 1e-6,
                "erf {x}: {} vs {erf}",
                erf_f32(x)
            );
        }
    }

    /// erf in f64 by its Maclaurin series (|x| ≤ 3) or its asymptotic continued fraction.
    fn erf_f64(x: f64) -> f64 {
        let a = x.abs();
        let value = if a <= 3.0 {
            let (mut term, mut sum, mut n) = (a, a, 0.0);
            while term.abs() > 1e-17 * sum.abs() {
                n += 1.0;
                term *= -a * a / n;
                sum += term / (2.0 * n + 1.0);
            }
            sum * 2.0 / std::f64::consts::PI.sqrt()
        } else {
            // erfc(a) = exp(-a²)/√π · 1/(a + 1/2/(a + 1/(a + 3/2/(a + …)))).
            let mut fraction = a;
            for k in (1..60).rev() {
                fraction = a + (k as f64 / 2.0) / fraction;
            }
            1.0 - (-a * a).exp() / std::f64::consts::PI.sqrt() / fraction
        };
        value.copysign(x)
    }
}
