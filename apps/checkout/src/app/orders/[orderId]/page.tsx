import { OrderConfirmation } from '@/components/OrderConfirmation';

export default async function OrderPage({
  params,
  searchParams,
}: {
  params: Promise<{ orderId: string }>;
  searchParams: Promise<{ key?: string | string[] }>;
}) {
  const { orderId } = await params;
  const { key } = await searchParams;
  return <OrderConfirmation orderId={orderId} checkoutKey={typeof key === 'string' ? key : null} />;
}
