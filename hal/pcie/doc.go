// Package pcie is weft's HAL backend for NVIDIA GPUs over PCIe.
package pcie
